//! `klock torture`: the kernel's locktorture for klock's locks and their
//! peers (docs/torture.md).
//!
//! Writer (and, for reader-writer types, reader) threads hammer one lock
//! with random short delays, yields and sleeps inside and outside the
//! critical section, occasional long holds, try and timed acquisitions
//! where the lock has them, and stutter (all threads pause and resume).
//! The checks and the output are in [`engine`]; the lock as torture sees
//! it in [`lock`]; the `--type` list in [`registry`] (a view of the one
//! lock registry); the deliberately broken locks in [`busted`].

pub mod engine;
pub mod lock;
pub mod registry;

/// The deliberately broken locks (they live with the other lock types).
pub use crate::bench::busted;

pub use engine::{Config, Outcome};
pub use registry::TortureType;
use std::time::Duration;

/// What the user asked for, before validation.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub ty: String,
    pub nwriters: Option<usize>,
    pub nreaders: Option<usize>,
    pub duration: Option<Duration>,
    pub stat_interval: Option<Duration>,
    pub long_hold: Option<Duration>,
    pub stutter: Option<Duration>,
    pub watchdog: Option<Duration>,
}

/// Defaults (the CPU-count ones are computed).
pub const DEFAULT_DURATION: Duration = Duration::from_secs(10);
pub const DEFAULT_STAT_INTERVAL: Duration = Duration::from_secs(1);
pub const DEFAULT_LONG_HOLD: Duration = Duration::from_millis(50);
pub const DEFAULT_STUTTER: Duration = Duration::from_secs(1);
pub const DEFAULT_WATCHDOG: Duration = Duration::from_secs(5);

impl Options {
    /// Resolve `--type` and check every value; errors say what to do.
    pub fn plan(&self) -> Result<(TortureType, Config), String> {
        let ty = registry::find(&self.ty)?;
        let cpus = klock::sys::online_cpus().max(1);
        let nwriters = self.nwriters.unwrap_or(2 * cpus);
        let nreaders = match self.nreaders {
            Some(n) if n > 0 && !ty.shared => {
                return Err(format!(
                "--type {} has no shared (read) side: drop --nreaders or pick a reader-writer type",
                ty.id
            ))
            }
            Some(n) => n,
            None if ty.shared => cpus,
            None => 0,
        };
        if nwriters > 1024 || nreaders > 1024 {
            return Err(format!(
                "--nwriters and --nreaders must be at most 1024 (got {nwriters} and {nreaders})"
            ));
        }
        if nwriters + nreaders == 0 {
            return Err("--nwriters and --nreaders are both 0: nothing would run".into());
        }
        let duration = self.duration.unwrap_or(DEFAULT_DURATION);
        if duration < Duration::from_millis(10) || duration > Duration::from_secs(7 * 24 * 3600) {
            return Err(format!(
                "--duration must be between 10ms and 1 week (got {duration:?})"
            ));
        }
        let stat_interval = self.stat_interval.unwrap_or(DEFAULT_STAT_INTERVAL);
        if stat_interval < Duration::from_millis(10) {
            return Err(format!(
                "--stat-interval must be at least 10ms (got {stat_interval:?})"
            ));
        }
        let long_hold = self.long_hold.unwrap_or(DEFAULT_LONG_HOLD);
        let watchdog = self.watchdog.unwrap_or(DEFAULT_WATCHDOG);
        if watchdog < Duration::from_millis(100) {
            return Err(format!(
                "--watchdog must be at least 100ms (got {watchdog:?})"
            ));
        }
        if long_hold > Duration::from_secs(10) || long_hold >= watchdog {
            return Err(format!(
                "--long-hold must be shorter than --watchdog and at most 10s (got {long_hold:?}, watchdog {watchdog:?})"
            ));
        }
        let stutter = self.stutter.unwrap_or(DEFAULT_STUTTER);
        if !stutter.is_zero() && stutter < Duration::from_millis(20) {
            return Err(format!(
                "--stutter must be 0 (off) or at least 20ms (got {stutter:?})"
            ));
        }
        let cfg = Config {
            type_name: ty.id.into(),
            nwriters,
            nreaders,
            duration,
            stat_interval,
            long_hold,
            stutter,
            watchdog,
        };
        Ok((ty, cfg))
    }
}

/// `klock torture --list`.
pub fn list() -> String {
    let mut s = String::from("Lock types (--type):\n");
    for t in registry::all().iter().filter(|t| !t.hidden) {
        let mut caps = vec![if t.shared { "rw" } else { "excl" }];
        if t.try_ {
            caps.push("try");
        }
        if t.timed {
            caps.push("timed");
        }
        if t.downgrade {
            caps.push("downgrade");
        }
        s += &format!(
            "  {:<20} {:<26} {}{}\n",
            t.id,
            format!("[{}]", caps.join(",")),
            if t.klock || t.broken { "" } else { "peer: " },
            t.about
        );
    }
    s
}

/// `klock torture --list-klock`: klock's own types, one per line (for CI).
pub fn list_klock() -> String {
    registry::all()
        .iter()
        .filter(|t| t.klock)
        .map(|t| format!("{}\n", t.id))
        .collect()
}
