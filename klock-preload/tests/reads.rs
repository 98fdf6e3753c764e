//! The preload's table of a thread's read holds (`src/reads.rs`), built
//! here on its own: the library itself is a `cdylib` without a test
//! harness. Its tests are the module's own (`reads::tests`).

#[path = "../src/reads.rs"]
mod reads;
