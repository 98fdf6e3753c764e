//! Records which source the `klock` binary is built from, for the result
//! files (`git_commit`, `git_dirty`): `KLOCK_GIT_COMMIT` (the commit hash,
//! or `unknown`) and `KLOCK_GIT_DIRTY` (`true`, `false` or `unknown`).
//!
//! Outside a git checkout of this workspace (a crates.io package, a source
//! tarball, no `git` installed) the build still succeeds: the commit comes
//! from the package's `.cargo_vcs_info.json` when there is one, and is
//! `unknown` otherwise.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The paths whose changes alter the binary; `git_dirty` looks at these
/// only, and a change to any of them re-runs this script.
const SOURCES: &[&str] = &["klock", "klock-cli", "Cargo.toml", "Cargo.lock"];

fn git(root: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim_end().to_string())
}

/// A path printed by `git rev-parse --git-path`, made absolute.
fn git_path(root: &Path, name: &str) -> Option<PathBuf> {
    let p = PathBuf::from(git(root, &["rev-parse", "--git-path", name])?);
    Some(if p.is_absolute() { p } else { root.join(p) })
}

fn rerun_if_exists(p: &Path) {
    // A path that does not exist would make cargo re-run the script on
    // every build.
    if p.exists() {
        println!("cargo:rerun-if-changed={}", p.display());
    }
}

/// `(commit, dirty)` from git, when the workspace root is the top of a
/// git work tree (not merely inside some other repository).
fn from_git(root: &Path) -> Option<(String, String)> {
    let top = PathBuf::from(git(root, &["rev-parse", "--show-toplevel"])?);
    if top.canonicalize().ok()? != root.canonicalize().ok()? {
        return None;
    }
    // In a linked work tree `.git` is a file, and HEAD and the index live
    // under the main repository's `.git/worktrees/NAME/`, the branch refs
    // under the common directory: `--git-path` resolves each.
    for name in ["HEAD", "index", "packed-refs"] {
        if let Some(p) = git_path(root, name) {
            rerun_if_exists(&p);
        }
    }
    if let Some(r) = git(root, &["symbolic-ref", "-q", "HEAD"]) {
        if let Some(p) = git_path(root, &r) {
            rerun_if_exists(&p);
        }
    }
    let commit = git(root, &["rev-parse", "HEAD"])?;
    let mut status = vec!["status", "--porcelain", "--"];
    status.extend(SOURCES);
    let dirty = match git(root, &status) {
        Some(s) => (!s.is_empty()).to_string(),
        None => "unknown".into(),
    };
    Some((commit, dirty))
}

/// `(commit, dirty)` from the `.cargo_vcs_info.json` that `cargo package`
/// writes into a published crate (`{"git": {"sha1": "…", "dirty": true}, …}`;
/// read without a JSON parser so that the script needs no dependencies).
fn from_package(manifest: &Path) -> Option<(String, String)> {
    let p = manifest.join(".cargo_vcs_info.json");
    let text = std::fs::read_to_string(p).ok()?;
    let value = |key: &str| {
        let rest = &text[text.find(&format!("\"{key}\""))? + key.len() + 2..];
        let rest = rest.trim_start().strip_prefix(':')?.trim_start();
        let end = rest.find([',', '}', '\n'])?;
        Some(rest[..end].trim().trim_matches('"').to_string())
    };
    let commit = value("sha1").filter(|c| c.chars().all(|c| c.is_ascii_hexdigit()))?;
    let dirty = (value("dirty").as_deref() == Some("true")).to_string();
    Some((commit, dirty))
}

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let root = manifest.parent().unwrap_or(&manifest).to_path_buf();
    println!("cargo:rerun-if-changed=build.rs");
    for s in SOURCES {
        rerun_if_exists(&root.join(s));
    }
    let (commit, dirty) = from_git(&root)
        .or_else(|| from_package(&manifest))
        .unwrap_or_else(|| ("unknown".into(), "unknown".into()));
    println!("cargo:rustc-env=KLOCK_GIT_COMMIT={commit}");
    println!("cargo:rustc-env=KLOCK_GIT_DIRTY={dirty}");
}
