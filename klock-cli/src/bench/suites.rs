//! The suite table: each suite is the shape of a kernel mailing-list
//! experiment. Adding a suite is one line here (and its file, or one
//! `Plain` in `plain.rs`).

use super::suite::{AnySuite, Spec};
use super::{ctxswitch, pi, plain, treelock};

/// Every suite, in `--list` and `all` order.
pub static SUITES: &[&dyn AnySuite] = &[
    &plain::MUTEX,
    &plain::RWLOCK,
    &plain::SPINLOCK,
    &plain::UNCONTENDED,
    &treelock::TREELOCK,
    // --- rtmutex
    &pi::PI,
    &plain::PI_THROUGHPUT,
    &plain::RWSEM_RATE,
    &plain::RWSEM_DEDICATED,
    &plain::RWSEM_PAGEFAULT,
    &ctxswitch::CTXSWITCH,
];

/// Suites run by a bare `klock bench`.
pub const HEADLINE: &[&str] = &["mutex", "rwlock"];

/// Suite groups: a name that runs several suites.
pub const GROUPS: &[(&str, &[&str])] = &[("rwsem", plain::RWSEM_GROUP)];

/// Every suite's spec.
pub fn specs() -> impl Iterator<Item = &'static Spec> {
    SUITES.iter().map(|s| s.spec())
}

/// Look up a suite; the error lists the valid names.
pub fn find(name: &str) -> Result<&'static dyn AnySuite, String> {
    SUITES
        .iter()
        .copied()
        .find(|s| s.spec().name == name)
        .ok_or_else(|| {
            format!(
                "unknown suite '{name}'. Valid suites: {} (see `klock bench --list`)",
                specs().map(|s| s.name).collect::<Vec<_>>().join(", ")
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A verdict compares locks measured side by side: in each suite that
    /// gives one, the runs at one thread count follow each other (every
    /// lock's run 1, then every lock's run 2, ...), so a slow phase of a
    /// noisy machine hits all of them alike.
    #[test]
    fn verdict_suites_run_their_locks_side_by_side() {
        for s in SUITES.iter().filter(|s| s.verdict()) {
            let name = s.spec().name;
            let opts = crate::bench::Options {
                suites: vec![name.to_string()],
                threads: vec![1, 2, 4],
                runs: Some(2),
                ..Default::default()
            };
            let plan = opts.plan().unwrap().remove(0);
            let points = s.points(&plan);
            let order = s.schedule(&plan);
            assert_eq!(order.len(), points.len() * 2, "{name}");
            let locks = plan.locks.len();
            for (k, block) in order.chunks(locks).enumerate() {
                let (threads, run) = (points[block[0].0].threads, block[0].1);
                assert!(
                    block
                        .iter()
                        .all(|&(i, r)| points[i].threads == threads && r == run),
                    "{name}: block {k} mixes thread counts or runs: {block:?}"
                );
                let mut ids: Vec<&str> = block.iter().map(|&(i, _)| points[i].id).collect();
                ids.sort_unstable();
                ids.dedup();
                assert_eq!(ids.len(), locks, "{name}: block {k} lacks a lock");
            }
        }
    }

    #[test]
    fn every_default_lock_exists_and_mixes_add_up() {
        for s in specs() {
            for l in s.default_locks {
                crate::bench::registry::find(l).unwrap();
            }
            for &t in s.default_threads {
                let (r, w) = (s.mix)(t);
                assert_eq!(r + w, t, "{}", s.name);
            }
        }
        assert!(find("nope").err().unwrap().contains("mutex"));
        for (_, members) in GROUPS {
            for m in *members {
                find(m).unwrap();
            }
        }
        let names: Vec<&str> = specs().map(|s| s.name).collect();
        let mut unique = names.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(names.len(), unique.len(), "suite names are unique");
    }
}
