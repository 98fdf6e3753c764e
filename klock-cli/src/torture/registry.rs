//! Every lock `klock torture --type` knows: the lines of the one lock
//! registry ([`crate::bench::registry`]) that have a torture side. Adding
//! a lock to torture is giving its registry line `klock("about")` (or
//! `peer`, `broken`, `hidden`); what the run mixes in (try, timed,
//! downgrade, readers) comes from the lock type's constants.

use super::engine::{run, Config, Outcome};
use crate::bench::peers::TryBench;
use crate::bench::registry::{self, per_lock, PerLock, TortureKind};

/// One `--type`.
pub struct TortureType {
    pub id: &'static str,
    pub about: &'static str,
    /// One of klock's own locks (CI tortures every one of these).
    pub klock: bool,
    /// Deliberately broken (expected to FAIL).
    pub broken: bool,
    /// Not listed (test-only).
    pub hidden: bool,
    pub shared: bool,
    pub try_: bool,
    pub timed: bool,
    pub downgrade: bool,
    pub run: fn(&Config) -> Outcome,
}

/// The torture run of a registered lock type.
struct Runner;

impl PerLock for Runner {
    type Out = fn(&Config) -> Outcome;
    fn with<L: TryBench>() -> Self::Out {
        run::<L>
    }
}

/// Every type: klock's, then the peers, then the broken ones (each group
/// in registry order).
pub fn all() -> Vec<TortureType> {
    let mut types: Vec<(TortureKind, TortureType)> = registry::every()
        .into_iter()
        .filter_map(|e| {
            let t = e.torture?;
            Some((
                t.kind,
                TortureType {
                    id: e.id,
                    about: t.about,
                    klock: t.kind == TortureKind::Klock,
                    broken: matches!(t.kind, TortureKind::Broken | TortureKind::Hidden),
                    hidden: t.kind == TortureKind::Hidden,
                    shared: e.shared,
                    try_: e.tracked,
                    timed: e.timed,
                    downgrade: e.downgrade,
                    run: per_lock::<Runner>(e.id).expect("a registry line has a type"),
                },
            ))
        })
        .collect();
    // Stable: registry order within each group.
    types.sort_by_key(|(kind, _)| (*kind).min(TortureKind::Broken));
    types.into_iter().map(|(_, t)| t).collect()
}

/// Look up `id` (hidden types included); the error lists the valid names.
pub fn find(id: &str) -> Result<TortureType, String> {
    let mut all = all();
    match all.iter().position(|t| t.id == id) {
        Some(i) => Ok(all.swap_remove(i)),
        None => Err(format!(
            "unknown --type '{id}'. Valid types: {} (see `klock torture --list`)",
            all.iter()
                .filter(|t| !t.hidden)
                .map(|t| t.id)
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    /// A klock type is a bench lock too, so a torture failure and a bench
    /// figure name the same lock.
    #[test]
    fn klock_types_are_bench_locks() {
        for t in super::all().iter().filter(|t| t.klock) {
            let b = crate::bench::registry::find(t.id)
                .unwrap_or_else(|e| panic!("torture type {} is not a bench lock: {e}", t.id));
            assert_eq!(b.shared, t.shared, "{}: shared side differs", t.id);
        }
    }
}
