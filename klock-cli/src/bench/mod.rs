//! `klock bench`: the kernel community's lock experiments, run side by side
//! with the locks people use today.
//!
//! The modules, from the bottom up (`tests/bench_modules.rs` keeps it so:
//! a module names only modules below it, and none names this one):
//!
//! * the locks: `lock` (the [`lock::BenchLock`] trait family), `peers`
//!   (the locks klock is measured against), `raw` (any `lock_api` lock),
//!   `klocks`, `pi_peers`, `busted` (deliberately broken, for `klock
//!   torture`), `tracked` (lockstat around any of them), and `registry`,
//!   the one table of them, bench's and torture's;
//! * measuring: `stats`, `xfer`, `workload` (the common workload);
//! * results: `report` (rows, files, tables), `plot` and `verdict`;
//! * the suites: `suite` (the one shape and its driver), `plain`,
//!   `treelock`, `pi`, `ctxswitch`, and `suites`, the table of them;
//! * the commands: `driver` (`klock bench`) and `stat` (`klock stat`).

pub mod busted;
pub mod ctxswitch;
pub mod driver;
pub mod klocks;
pub mod lock;
pub mod peers;
pub mod pi;
pub mod pi_peers;
pub mod plain;
pub mod plot;
pub mod raw;
pub mod registry;
pub mod report;
pub mod stat;
pub mod stats;
pub mod suite;
pub mod suites;
pub mod tracked;
pub mod treelock;
pub mod verdict;
pub mod workload;
pub mod xfer;

pub use driver::{execute, list, list_for, Options, OUT_DIR};
pub use suite::Plan;
