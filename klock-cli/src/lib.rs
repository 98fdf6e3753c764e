//! The `klock` command's library: the benchmark harness (with its peers,
//! suites and `klock stat`) and the torture tester.

pub mod bench;
pub mod run;
pub mod torture;
