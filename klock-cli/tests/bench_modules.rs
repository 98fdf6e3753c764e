//! The modules of `klock bench` name each other in no circle: each module
//! of `src/bench` may name (`super::<module>`, `crate::bench::<module>`)
//! others, but never one that names it back, directly or around a circle.
//! A circle is where a change to one module forces a change to the other
//! and neither can be read, tested or replaced alone: the suites name the
//! lock registry, so the registry must not name a suite (it instantiates
//! their generic runs through `registry::PerLock` instead), and the driver
//! names the suites, so no suite names the driver.
//!
//! An item of `mod.rs` named by a submodule (`super::Plan`) is an edge to
//! `mod`, which names every module it re-exports: so a submodule names the
//! module that defines an item, not the re-export.
//!
//! A module in a folder (`pi/mod.rs`, or `report.rs` beside `report/`) is
//! one module here: its own file and its submodules' files (`pi/*.rs`)
//! together, where a submodule names the other modules of `bench` as
//! `super::super::<module>` or `crate::bench::<module>` (its `super::` is
//! the folder's module itself).
//!
//! Limits of the scan (a line-based reading, not a parser), as in the
//! library's `tests/layers.rs`:
//! * comments are skipped: doc links are not dependencies;
//! * test code is skipped: everything from an inline `mod tests {` (or a
//!   `mod` whose attribute line above mentions `test`) to the end of the
//!   file, so test modules must come last in their file; a submodule's
//!   file named `tests.rs` is test code as a whole;
//! * `super::{a, b::c}` and `crate::bench::{…}` groups are read, also
//!   across lines; paths that leave `bench` (`super::super::` in a
//!   module's own file) are not.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

#[path = "../../klock/tests/support/circle.rs"]
mod circle;

/// The parent module's name in the graph.
const PARENT: &str = "mod";

/// One source file of a module: its path below `src/bench`, its text, and
/// whether it is a submodule's (where `bench` is `super::super::`).
struct Source {
    path: String,
    text: String,
    nested: bool,
}

/// The modules of `src/bench` by name, each with its source files: `x.rs`
/// or `x/mod.rs`, and the files of `x/` but test code (`tests.rs`).
fn modules() -> Vec<(String, Vec<Source>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/bench");
    let mut out: BTreeMap<String, Vec<Source>> = BTreeMap::new();
    let read = |p: &Path, nested: bool| Source {
        path: p.strip_prefix(&dir).unwrap().display().to_string(),
        text: std::fs::read_to_string(p).unwrap(),
        nested,
    };
    let is_rs = |p: &Path| p.extension().is_some_and(|x| x == "rs");
    let stem = |p: &Path| p.file_stem().unwrap().to_str().unwrap().to_string();
    for p in std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()) {
        if is_rs(&p) {
            out.entry(stem(&p)).or_default().push(read(&p, false));
        } else if p.is_dir() {
            let name = p.file_name().unwrap().to_str().unwrap().to_string();
            for q in std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()) {
                match (is_rs(&q), stem(&q).as_str()) {
                    (true, "mod") => out.entry(name.clone()).or_default().push(read(&q, false)),
                    (true, "tests") | (false, _) => {}
                    (true, _) => out.entry(name.clone()).or_default().push(read(&q, true)),
                }
            }
        }
    }
    out.into_iter()
        .map(|(name, mut files)| {
            files.sort_by(|a, b| a.path.cmp(&b.path));
            (name, files)
        })
        .collect()
}

/// Whether `line` opens an inline module (`mod name {`, any visibility).
fn opens_inline_mod(line: &str) -> Option<&str> {
    let rest = line
        .strip_prefix("pub(crate) ")
        .or_else(|| line.strip_prefix("pub(super) "))
        .or_else(|| line.strip_prefix("pub "))
        .unwrap_or(line);
    rest.strip_prefix("mod ")?.strip_suffix('{').map(str::trim)
}

/// The first segment of each top-level path of a group's inside
/// (`a::X, b::{c, d}` gives `a`, `b`).
fn group_heads(group: &str) -> Vec<String> {
    let mut heads = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in group.char_indices().chain([(group.len(), ',')]) {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                let head = group[start..i].trim().split("::").next().unwrap().trim();
                if !head.is_empty() && head != "self" {
                    heads.push(head.to_string());
                }
                start = i + 1;
            }
            _ => {}
        }
    }
    heads
}

/// Where the group that `text` continues closes (the `}` that brings
/// `depth` to 0), counting braces into `depth`.
fn group_end(text: &str, depth: &mut usize) -> Option<usize> {
    for (i, c) in text.char_indices() {
        match c {
            '{' => *depth += 1,
            '}' => {
                *depth -= 1;
                if *depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// A group read over several lines: its text so far and its brace depth.
type Group = Option<(String, usize)>;

/// The names that follow any of `prefixes` in `code`: the first segment
/// of a path, or of each path of a `{…}` group (which may go on over the
/// next lines: `group` carries it).
fn refs(code: &str, prefixes: &[&str], group: &mut Group, out: &mut Vec<String>) {
    let mut rest = code;
    if let Some((g, depth)) = group.as_mut() {
        match group_end(rest, depth) {
            Some(end) => {
                g.push_str(&rest[..end]);
                out.extend(group_heads(&group.take().unwrap().0));
                rest = &rest[end + 1..];
            }
            None => {
                g.push_str(rest);
                return;
            }
        }
    }
    loop {
        let Some((at, len)) = prefixes
            .iter()
            .filter_map(|p| rest.find(p).map(|at| (at, p.len())))
            .min()
        else {
            return;
        };
        let before = rest[..at].chars().next_back();
        let mut after = &rest[at + len..];
        rest = after;
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        // `super::super::…` leaves `bench`: skip the whole path.
        if after.starts_with("super::") {
            while let Some(a) = after.strip_prefix("super::") {
                after = a;
            }
            rest = after.trim_start_matches(|c: char| c.is_alphanumeric() || c == '_');
            continue;
        }
        if let Some(inner) = after.strip_prefix('{') {
            let mut depth = 1;
            match group_end(inner, &mut depth) {
                Some(end) => {
                    out.extend(group_heads(&inner[..end]));
                    rest = &inner[end + 1..];
                }
                None => {
                    *group = Some((inner.to_string(), depth));
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

/// The edges from module `from` that `file` adds to `edges`.
fn scan(
    from: &str,
    file: &Source,
    prefixes: &[&str],
    names: &BTreeSet<&str>,
    edges: &mut BTreeMap<(String, String), Vec<String>>,
) {
    let mut prev = "";
    let mut group = None;
    for (n, raw) in file.text.lines().enumerate() {
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
        let mut found = Vec::new();
        refs(code, prefixes, &mut group, &mut found);
        for name in found {
            let to = if names.contains(name.as_str()) {
                name
            } else if from == PARENT {
                // `use std::…` and the like in mod.rs.
                continue;
            } else {
                PARENT.to_string()
            };
            if to != from {
                edges
                    .entry((from.to_string(), to))
                    .or_default()
                    .push(format!("src/bench/{}:{}: {line}", file.path, n + 1));
            }
        }
    }
}

/// `from -> to -> [where]` for every reference outside tests and comments.
fn graph() -> BTreeMap<(String, String), Vec<String>> {
    let mods = modules();
    let names: BTreeSet<&str> = mods.iter().map(|(n, _)| n.as_str()).collect();
    let mut edges = BTreeMap::new();
    for (from, files) in &mods {
        for file in files {
            // `mod.rs` names its children by their bare names (`pub use
            // driver::…`); the children name theirs through `super::`, and
            // the submodules of a child through `super::super::`.
            let prefixes: &[&str] = if from == PARENT {
                &["use ", "crate::bench::"]
            } else if file.nested {
                &["super::super::", "crate::bench::"]
            } else {
                &["super::", "crate::bench::"]
            };
            scan(from, file, prefixes, &names, &mut edges);
        }
    }
    edges
}

/// A circle in `edges`, if there is one.
fn circle(edges: &BTreeMap<(String, String), Vec<String>>) -> Option<Vec<String>> {
    let mut next: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (from, to) in edges.keys() {
        next.entry(from).or_default().insert(to);
    }
    circle::find_circle(&next).map(|c| c.into_iter().map(String::from).collect())
}

#[test]
fn bench_modules_name_each_other_in_no_circle() {
    let edges = graph();
    // The scan sees the edges it must: a sanity check against a scan that
    // silently finds nothing.
    for (from, to) in [
        ("treelock", "registry"),
        ("suites", "treelock"),
        ("mod", "driver"),
        ("suites", "pi"),
        // From a submodule's file (`pi/results.rs`).
        ("pi", "stats"),
    ] {
        assert!(
            edges.contains_key(&(from.to_string(), to.to_string())),
            "the scan lost the edge {from} -> {to}: {:?}",
            edges.keys().collect::<Vec<_>>()
        );
    }
    if let Some(c) = circle(&edges) {
        let at: Vec<String> = c
            .windows(2)
            .map(|w| edges[&(w[0].clone(), w[1].clone())][0].clone())
            .collect();
        panic!(
            "bench modules name each other in a circle: {}\n    {}",
            c.join(" -> "),
            at.join("\n    ")
        );
    }
}

#[test]
fn the_scan_reads_groups_and_finds_circles() {
    let mut group = None;
    let mut out = Vec::new();
    let p = &["super::", "crate::bench::"];
    refs("use super::{report::Row, suite};", p, &mut group, &mut out);
    refs("let x = super::stats::mean(&v);", p, &mut group, &mut out);
    refs("use crate::bench::{", p, &mut group, &mut out);
    refs("    registry::{self, find},", p, &mut group, &mut out);
    refs("    verdict };", p, &mut group, &mut out);
    refs("use super::super::torture;", p, &mut group, &mut out);
    assert_eq!(
        out,
        ["report", "suite", "stats", "registry", "verdict"],
        "{out:?}"
    );
    // A submodule's file: `super::` stays inside its module.
    let (mut group, mut out) = (None, Vec::new());
    let p = &["super::super::", "crate::bench::"];
    refs(
        "use super::{group::Barrier, SUITE};",
        p,
        &mut group,
        &mut out,
    );
    refs(
        "use super::super::{report::Row, stats};",
        p,
        &mut group,
        &mut out,
    );
    refs(
        "let u = crate::bench::workload::usage();",
        p,
        &mut group,
        &mut out,
    );
    assert_eq!(out, ["report", "stats", "workload"], "{out:?}");
    let e = |a: &str, b: &str| ((a.to_string(), b.to_string()), vec![String::new()]);
    let with: BTreeMap<_, _> = [e("a", "b"), e("b", "c"), e("c", "a")].into();
    assert_eq!(circle(&with).unwrap(), ["a", "b", "c", "a"]);
    let without: BTreeMap<_, _> = [e("a", "b"), e("b", "c"), e("a", "c")].into();
    assert_eq!(circle(&without), None);
}
