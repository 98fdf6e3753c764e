//! The `klock` command's library: the benchmark harness, its peers and
//! suites, and `klock torture`.

pub mod bench;
pub mod torture;
