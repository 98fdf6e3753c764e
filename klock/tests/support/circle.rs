//! The circle finder of the import-graph tests: `klock/tests/layers.rs`
//! (the library's layers) and `klock-cli/tests/bench_modules.rs` (the
//! bench modules) include this file.

use std::collections::{BTreeMap, BTreeSet};

/// A circle in the graph `next` (each module, and the modules it names),
/// as the modules along it with the first repeated at the end; `None`
/// if there is none. Depth-first search: a module met again on the
/// current path closes a circle.
pub fn find_circle<'a>(next: &BTreeMap<&'a str, BTreeSet<&'a str>>) -> Option<Vec<&'a str>> {
    fn visit<'a>(
        m: &'a str,
        next: &BTreeMap<&'a str, BTreeSet<&'a str>>,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) -> Option<Vec<&'a str>> {
        if let Some(i) = path.iter().position(|p| *p == m) {
            let mut circle = path[i..].to_vec();
            circle.push(m);
            return Some(circle);
        }
        if !done.insert(m) {
            return None;
        }
        path.push(m);
        for n in next.get(m).into_iter().flatten() {
            if let Some(c) = visit(n, next, path, done) {
                return Some(c);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    next.keys()
        .find_map(|m| visit(m, next, &mut Vec::new(), &mut done))
}
