//! The crate's layers point down only: each module of `klock/src` may name
//! (`crate::<module>`) modules of its own layer or below, never above, and
//! no two modules name each other, directly or around a circle.
//!
//! The layers (see `docs/design.md`, "Layers"):
//!
//! 1. platform: `sys`, `glibc_tid`, `thread`, `sync`, `spin`;
//! 2. the oracle and the instruments: `oncpu`, `oncpu_bpf`, `events`,
//!    `spinadapt`, `config`;
//! 3. the locks: `qspinlock`, `osq`, `waitlock`, `waitlist`, `mutex`,
//!    `rwsem`, `qrwlock`, `rtmutex`, `condvar`, `lockstat`, `rt`;
//! 4. the crate root (`lib.rs`), which re-exports and may name anything.
//!
//! A `crate::<name>` whose name is not a module is an item of the crate
//! root (`crate::Mutex`, `crate::RawQSpinLock`): layer 4, so a module
//! below it must name the item through its own module instead.
//!
//! Limits of the scan (a line-based reading, not a parser):
//! * comments (`//`, `///`, `//!`, and the rest of a line after `//`) are
//!   skipped: doc links are not dependencies;
//! * test code is skipped: files named `tests.rs`, and everything from an
//!   inline `mod <name> {` whose attribute line above mentions `test` (or
//!   `mod tests {`) to the end of the file, so test modules must come last
//!   in their file, as they do; a `#[cfg(test)]` item elsewhere is scanned;
//! * `crate::{a, b::c}` groups are read, also across lines; paths written
//!   without `crate::` (`super::super::x`, `use` of a re-export) are not;
//! * a `//` inside a string literal cuts the line there.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

#[path = "support/circle.rs"]
mod circle;

/// Every module of `klock/src` and its layer (the crate root is layer 4).
const LAYERS: &[(&str, u8)] = &[
    // 1. platform
    ("sys", 1),
    ("glibc_tid", 1),
    ("thread", 1),
    ("sync", 1),
    ("spin", 1),
    // 2. the oracle and the instruments
    ("oncpu", 2),
    ("oncpu_bpf", 2),
    ("events", 2),
    ("spinadapt", 2),
    ("config", 2),
    // 3. the locks
    ("qspinlock", 3),
    ("osq", 3),
    ("ownerspin", 3),
    ("waitlock", 3),
    ("waitlist", 3),
    ("mutex", 3),
    ("rwsem", 3),
    ("qrwlock", 3),
    ("rtmutex", 3),
    ("condvar", 3),
    ("lockstat", 3),
    ("rt", 3),
];

/// The crate root.
const ROOT: &str = "lib";

/// Edges allowed against the rule, each with its reason. An entry that is
/// no longer needed fails the test, so that it is removed with the edge.
const EXCEPTIONS: &[(&str, &str, &str)] = &[];

fn layer(module: &str) -> u8 {
    if module == ROOT {
        return 4;
    }
    LAYERS
        .iter()
        .find(|(m, _)| *m == module)
        .map(|&(_, l)| l)
        .unwrap_or_else(|| {
            panic!("module `{module}` is not in the layer table of tests/layers.rs: add it")
        })
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Whether `line` opens an inline module (`mod name {`, any visibility).
fn opens_inline_mod(line: &str) -> Option<&str> {
    let rest = line
        .strip_prefix("pub(crate) ")
        .or_else(|| line.strip_prefix("pub(super) "))
        .or_else(|| line.strip_prefix("pub "))
        .unwrap_or(line);
    let name = rest.strip_prefix("mod ")?.strip_suffix('{')?.trim();
    Some(name)
}

/// The names that follow `crate::` in `code`: a module or root item name,
/// or the first segment of each path of a `crate::{…}` group (the group
/// may go on over the next lines: `group` carries it).
fn crate_refs(code: &str, group: &mut Option<String>, out: &mut Vec<String>) {
    let mut rest = code;
    if let Some(g) = group.as_mut() {
        match rest.find('}') {
            Some(end) => {
                g.push_str(&rest[..end]);
                let g = group.take().unwrap();
                out.extend(group_heads(&g));
                rest = &rest[end + 1..];
            }
            None => {
                g.push_str(rest);
                return;
            }
        }
    }
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().next_back();
        let after = &rest[at + "crate::".len()..];
        rest = after;
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        if let Some(inner) = after.strip_prefix('{') {
            match inner.find('}') {
                Some(end) => {
                    out.extend(group_heads(&inner[..end]));
                    rest = &inner[end + 1..];
                }
                None => {
                    *group = Some(inner.to_string());
                    return;
                }
            }
        } else {
            let name: String = after
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.push(name);
            }
        }
    }
}

fn group_heads(group: &str) -> Vec<String> {
    group
        .split(',')
        .map(|p| p.trim().split("::").next().unwrap().trim().to_string())
        .filter(|h| !h.is_empty())
        .collect()
}

/// `from -> to -> [where]` for every `crate::` reference outside tests
/// and comments, `to` being a module of the table or the crate root.
fn graph() -> BTreeMap<(String, String), Vec<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut edges = BTreeMap::new();
    for file in files {
        if file.file_name().unwrap() == "tests.rs" {
            continue;
        }
        let rel = file.strip_prefix(&src).unwrap();
        let first = rel.components().next().unwrap().as_os_str();
        let from = first.to_str().unwrap().trim_end_matches(".rs").to_string();
        layer(&from); // every module must be in the table
        let text = std::fs::read_to_string(&file).unwrap();
        let mut prev = "";
        let mut group = None;
        for (n, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if let Some(name) = opens_inline_mod(line) {
                if name == "tests" || (prev.starts_with("#[") && prev.contains("test")) {
                    break;
                }
            }
            if !line.is_empty() {
                prev = line;
            }
            if line.starts_with("//") {
                continue;
            }
            let code = line.split("//").next().unwrap();
            let mut refs = Vec::new();
            crate_refs(code, &mut group, &mut refs);
            for name in refs {
                let to = if LAYERS.iter().any(|(m, _)| *m == name) {
                    name
                } else {
                    ROOT.to_string()
                };
                if to != from {
                    edges
                        .entry((from.clone(), to))
                        .or_insert_with(Vec::new)
                        .push(format!("src/{}:{}: {}", rel.display(), n + 1, line));
                }
            }
        }
    }
    edges
}

fn allowed(from: &str, to: &str) -> bool {
    EXCEPTIONS.iter().any(|&(f, t, _)| f == from && t == to)
}

#[test]
fn modules_name_only_their_layer_or_below() {
    let edges = graph();
    let mut wrong = Vec::new();
    for ((from, to), at) in &edges {
        if layer(to) > layer(from) && !allowed(from, to) {
            wrong.push(format!(
                "{from} (layer {}) names {to} (layer {}):\n    {}",
                layer(from),
                layer(to),
                at.join("\n    ")
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "upward references (move the item down, or let the layer above register with the one below):\n{}",
        wrong.join("\n")
    );
    for &(from, to, why) in EXCEPTIONS {
        assert!(
            edges.contains_key(&(from.to_string(), to.to_string())),
            "exception {from} -> {to} ({why}) is no longer needed: remove it"
        );
    }
}

#[test]
fn modules_name_each_other_in_no_circle() {
    let edges = graph();
    let mut next: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (from, to) in edges.keys() {
        if to != ROOT && !allowed(from, to) {
            next.entry(from).or_default().insert(to);
        }
    }
    if let Some(circle) = circle::find_circle(&next) {
        let at: Vec<String> = circle
            .windows(2)
            .map(|w| edges[&(w[0].to_string(), w[1].to_string())][0].clone())
            .collect();
        panic!(
            "modules name each other in a circle: {}\n    {}",
            circle.join(" -> "),
            at.join("\n    ")
        );
    }
}

#[test]
fn the_scan_reads_groups_and_skips_comments() {
    let mut group = None;
    let mut out = Vec::new();
    crate_refs(
        "use crate::{sync::AtomicU32, thread};",
        &mut group,
        &mut out,
    );
    crate_refs(
        "let x = crate::sys::gettid_uncached();",
        &mut group,
        &mut out,
    );
    crate_refs("use crate::{", &mut group, &mut out);
    crate_refs("    spin::cpu_relax,", &mut group, &mut out);
    crate_refs("    events };", &mut group, &mut out);
    crate_refs(
        "let y = mycrate::nothing + $crate::oncpu;",
        &mut group,
        &mut out,
    );
    assert_eq!(
        out,
        ["sync", "thread", "sys", "spin", "events", "oncpu"],
        "{out:?}"
    );
    assert_eq!(opens_inline_mod("pub(crate) mod imp {"), Some("imp"));
    assert_eq!(opens_inline_mod("mod slow;"), None);
}
