//! The preload's table of a thread's read holds (`src/reads.rs`), built
//! here on its own: the library itself is a `cdylib` without a test
//! harness. Its tests are the module's own (`reads::tests`).

// The library is built for x86-64 glibc only (see src/lib.rs).
#![cfg(all(target_os = "linux", target_arch = "x86_64", target_env = "gnu"))]

#[path = "../src/reads.rs"]
mod reads;
