//! The `klock` command's library: the benchmark harness, its peers and
//! suites (and later torture and stat).

pub mod bench;
pub mod torture;
