//! The lock map (`KLOCK_LOCK_MAP`, `klock run --lock-map`): which families
//! of pthread locks klock replaces and which stay glibc's, so that an
//! operator can tell which replaced family helps or hurts a program.
//!
//! Grammar: comma-separated `FAMILY=IMPL` pairs, `FAMILY` one of `mutex`,
//! `rwlock`, `spin`, `cond` (or `all`), `IMPL` one of `klock` (the
//! default) and `glibc`. Later pairs override earlier ones. glibc's
//! condition variable works only with glibc's mutexes (it unlocks and
//! relocks them through glibc's internals), so `cond=glibc` needs
//! `mutex=glibc`; klock's works with both.
//!
//! Shared, as a file, by the preload (which reads the variable at load)
//! and the `klock` command (which checks `--lock-map` before it starts the
//! program): no dependencies.

/// The lock families the preload replaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// `pthread_mutex_*`.
    Mutex = 1,
    /// `pthread_rwlock_*`.
    Rwlock = 2,
    /// `pthread_spin_*`.
    Spin = 4,
    /// `pthread_cond_*`.
    Cond = 8,
}

/// Every family, with its name in the map.
pub const FAMILIES: [(&str, Family); 4] = [
    ("mutex", Family::Mutex),
    ("rwlock", Family::Rwlock),
    ("spin", Family::Spin),
    ("cond", Family::Cond),
];

/// A parsed map: the set of families left to glibc.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LockMap {
    glibc: u8,
}

impl LockMap {
    /// Whether `f` stays glibc's.
    #[inline]
    pub fn glibc(self, f: Family) -> bool {
        self.glibc & f as u8 != 0
    }

    /// The map as bits (for an atomic).
    #[allow(dead_code)] // the command only parses
    pub fn bits(self) -> u8 {
        self.glibc
    }
}

/// Parse a map (module docs); the error says what is wrong and what is
/// accepted.
pub fn parse(spec: &str) -> Result<LockMap, String> {
    let mut m = LockMap::default();
    for pair in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((fam, imp)) = pair.split_once('=') else {
            return Err(format!(
                "`{pair}` is not FAMILY=IMPL (for example mutex=glibc,rwlock=klock)"
            ));
        };
        let bits = match fam.trim() {
            "all" => FAMILIES.iter().fold(0, |b, (_, f)| b | *f as u8),
            name => match FAMILIES.iter().find(|(n, _)| *n == name) {
                Some((_, f)) => *f as u8,
                None => {
                    return Err(format!(
                        "unknown lock family `{name}` (known: mutex, rwlock, spin, cond, all)"
                    ))
                }
            },
        };
        match imp.trim() {
            "glibc" => m.glibc |= bits,
            "klock" => m.glibc &= !bits,
            other => {
                return Err(format!(
                    "unknown implementation `{other}` for `{}` (known: klock, glibc)",
                    fam.trim()
                ))
            }
        }
    }
    if m.glibc(Family::Cond) && !m.glibc(Family::Mutex) {
        return Err("cond=glibc needs mutex=glibc: glibc's condition variable \
                    works only with glibc's mutexes"
            .into());
    }
    Ok(m)
}
