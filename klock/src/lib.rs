//! # klock — the Linux kernel's locking playbook in userspace
//!
//! Platform layer: [`sync`] (atomics shim, std or loom), [`sys`] (futex,
//! tid, cpu, clock), [`thread`] (thread index and per-thread queue nodes),
//! [`spin`] (relax and time-bounded spin budgets).

pub mod spin;
pub mod sync;
pub mod sys;
pub mod thread;
