//! The torture run: writer and reader threads hammer one lock; the
//! checks; the control thread's statistics, stutter and watchdog.
//!
//! Checks (each violation counts as a Fail on its role's line):
//! - a writer that gets in finds no writer and no reader inside, and still
//!   none when it leaves;
//! - a reader that gets in finds no writer inside, and none (and unchanged
//!   data) when it leaves;
//! - lost updates: writers bump a protected counter with a plain load and
//!   store; at the end it must equal the number of write acquisitions;
//! - the watchdog: no acquisition anywhere for `watchdog`, or one thread
//!   waiting (or holding, or releasing) longer than the bound, fails the
//!   run and prints where every thread is.
//!
//! The check counters use Relaxed atomics on purpose: the lock under test
//! must supply the ordering (its acquire pairs with the previous holder's
//! release, so a correct lock always shows the previous holder's
//! decrement). Stronger orderings here could hide a lock's missing barrier.

use super::lock::{How, TortureLock};
use crossbeam_utils::CachePadded;
use klock::sys::monotonic_ns;
use std::cell::Cell;
use std::hint::spin_loop;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// A fully validated torture run.
#[derive(Debug, Clone)]
pub struct Config {
    /// The `--type` name, for the output.
    pub type_name: String,
    pub nwriters: usize,
    pub nreaders: usize,
    pub duration: Duration,
    pub stat_interval: Duration,
    /// Length of the occasional long critical section (zero: none).
    pub long_hold: Duration,
    /// Run this long, then pause every thread for a quarter of it (zero: never).
    pub stutter: Duration,
    /// No-progress bound of the watchdog.
    pub watchdog: Duration,
}

/// What a run found.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    pub success: bool,
    /// The watchdog fired: some threads may still be stuck in the lock.
    pub stalled: bool,
    pub writes: u64,
    pub reads: u64,
    pub write_fails: u64,
    pub read_fails: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Writer,
    Reader,
}

impl Role {
    fn name(self) -> &'static str {
        match self {
            Role::Writer => "writer",
            Role::Reader => "reader",
        }
    }
}

// Phases of a thread, as the watchdog reports them.
const OUTSIDE: u8 = 0;
const ACQUIRING: u8 = 1;
const HOLDING: u8 = 2;
const RELEASING: u8 = 3;
const PAUSED: u8 = 4;
const EXITED: u8 = 5;

// Acquisition modes.
const M_BLOCK: u8 = 0;
const M_TRY: u8 = 1;
const M_TIMED: u8 = 2;
const M_DOWNGRADE: u8 = 3;

/// One thread's published state. Written only by its thread (Relaxed:
/// statistics), read by the control thread.
struct Slot {
    role: Role,
    /// Index within its role.
    idx: usize,
    ops: AtomicU64,
    phase: AtomicU8,
    mode: AtomicU8,
    /// Monotonic ns when the current phase began.
    since: AtomicU64,
    /// Timeout of the current timed attempt, ns.
    timeout: AtomicU64,
    max_wait: AtomicU64,
    tries: AtomicU64,
    try_misses: AtomicU64,
    timed: AtomicU64,
    timeouts: AtomicU64,
    downgrades: AtomicU64,
}

impl Slot {
    fn new(role: Role, idx: usize) -> Self {
        Self {
            role,
            idx,
            ops: AtomicU64::new(0),
            phase: AtomicU8::new(OUTSIDE),
            mode: AtomicU8::new(M_BLOCK),
            since: AtomicU64::new(monotonic_ns()),
            timeout: AtomicU64::new(0),
            max_wait: AtomicU64::new(0),
            tries: AtomicU64::new(0),
            try_misses: AtomicU64::new(0),
            timed: AtomicU64::new(0),
            timeouts: AtomicU64::new(0),
            downgrades: AtomicU64::new(0),
        }
    }
    fn set(&self, phase: u8) {
        self.since.store(monotonic_ns(), Relaxed);
        self.phase.store(phase, Relaxed);
    }
    /// Single-writer counter bump.
    fn bump(c: &AtomicU64) {
        c.store(c.load(Relaxed) + 1, Relaxed);
    }
    fn who(&self) -> String {
        format!("{} {}", self.role.name(), self.idx)
    }
}

/// xorshift64*: cheap per-thread randomness (a `Cell` so that the write and
/// downgraded-read closures can share it).
struct Rng(Cell<u64>);

impl Rng {
    fn new(seed: u64) -> Self {
        Self(Cell::new(seed | 1))
    }
    fn next(&self) -> u64 {
        let mut x = self.0.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0.set(x);
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&self, n: u64) -> u64 {
        self.next() % n
    }
}

const MAX_MESSAGES: usize = 8;

struct Shared<L> {
    lock: L,
    cfg: Config,
    writers_in: CachePadded<AtomicU32>,
    readers_in: CachePadded<AtomicU32>,
    /// The protected counter (plain load + store by writers).
    data: CachePadded<AtomicU64>,
    max_readers_in: AtomicU32,
    write_fails: AtomicU64,
    read_fails: AtomicU64,
    messages: Mutex<Vec<String>>,
    stop: AtomicBool,
    paused: AtomicBool,
    /// Monotonic ns of the next long hold (claimed by CAS).
    next_long_hold: AtomicU64,
    slots: Vec<CachePadded<Slot>>,
}

impl<L: TortureLock> Shared<L> {
    fn fail(&self, role: Role, msg: impl FnOnce() -> String) {
        match role {
            Role::Writer => &self.write_fails,
            Role::Reader => &self.read_fails,
        }
        .fetch_add(1, Relaxed);
        let mut m = self.messages.lock().unwrap_or_else(|e| e.into_inner());
        if m.len() < MAX_MESSAGES {
            m.push(msg());
        }
    }

    /// Short random busy wait: 0 to ~2 µs.
    fn spin(rng: &Rng, max: u64) {
        for _ in 0..rng.below(max) {
            spin_loop();
        }
    }

    /// Inside the critical section: usually a short spin, now and then a
    /// yield or a short sleep, and (globally about once a second) a long hold.
    fn delay_inside(&self, rng: &Rng) {
        let lh = self.cfg.long_hold;
        if !lh.is_zero() {
            let now = monotonic_ns();
            let next = self.next_long_hold.load(Relaxed);
            if now >= next
                && self
                    .next_long_hold
                    .compare_exchange(
                        next,
                        now + 500_000_000 + rng.below(1_000_000_000),
                        Relaxed,
                        Relaxed,
                    )
                    .is_ok()
            {
                std::thread::sleep(lh);
                return;
            }
        }
        match rng.below(4096) {
            0 => std::thread::sleep(Duration::from_micros(20 + rng.below(180))),
            1..=7 => std::thread::yield_now(),
            _ => Self::spin(rng, 64),
        }
    }

    /// Between acquisitions.
    fn delay_outside(&self, rng: &Rng) {
        match rng.below(2048) {
            0 => std::thread::sleep(Duration::from_micros(50 + rng.below(450))),
            1..=15 => std::thread::yield_now(),
            _ => Self::spin(rng, 128),
        }
    }

    /// Entry bookkeeping common to both roles: phase, wait time, count.
    fn entered(&self, slot: &Slot) {
        let now = monotonic_ns();
        let waited = now.saturating_sub(slot.since.load(Relaxed));
        if waited > slot.max_wait.load(Relaxed) {
            slot.max_wait.store(waited, Relaxed);
        }
        Slot::bump(&slot.ops);
        slot.since.store(now, Relaxed);
        slot.phase.store(HOLDING, Relaxed);
    }

    fn writer_enter(&self, slot: &Slot) {
        self.entered(slot);
        let w = self.writers_in.fetch_add(1, Relaxed);
        let r = self.readers_in.load(Relaxed);
        if w != 0 {
            self.fail(Role::Writer, || {
                format!(
                    "{} got the lock while {w} other writer(s) held it",
                    slot.who()
                )
            });
        }
        if r != 0 {
            self.fail(Role::Writer, || {
                format!("{} got the lock while {r} reader(s) held it", slot.who())
            });
        }
    }

    /// The writer's critical section: a lost-update-prone increment around
    /// the random delay.
    fn writer_body(&self, rng: &Rng) {
        let v = self.data.load(Relaxed);
        self.delay_inside(rng);
        self.data.store(v + 1, Relaxed);
    }

    fn writer_leave(&self, slot: &Slot) {
        let r = self.readers_in.load(Relaxed);
        if r != 0 {
            self.fail(Role::Writer, || {
                format!("{r} reader(s) got in while {} held the lock", slot.who())
            });
        }
        let w = self.writers_in.fetch_sub(1, Relaxed);
        if w != 1 {
            self.fail(Role::Writer, || {
                format!("another writer got in while {} held the lock", slot.who())
            });
        }
        slot.set(RELEASING);
    }

    fn reader_enter(&self, slot: &Slot) {
        self.entered(slot);
        let n = self.readers_in.fetch_add(1, Relaxed) + 1;
        self.max_readers_in.fetch_max(n, Relaxed);
        let w = self.writers_in.load(Relaxed);
        if w != 0 {
            self.fail(Role::Reader, || {
                format!("{} got the lock while a writer held it", slot.who())
            });
        }
    }

    /// The reader's critical section: the data must not change under it.
    fn reader_body(&self, slot: &Slot, rng: &Rng) {
        let v = self.data.load(Relaxed);
        self.delay_inside(rng);
        let w = self.writers_in.load(Relaxed);
        if w != 0 {
            self.fail(Role::Reader, || {
                format!("a writer got in while {} held the lock", slot.who())
            });
        } else if self.data.load(Relaxed) != v {
            self.fail(Role::Reader, || {
                format!("the data changed under {}", slot.who())
            });
        }
    }

    fn reader_leave(&self, slot: &Slot) {
        self.readers_in.fetch_sub(1, Relaxed);
        slot.set(RELEASING);
    }

    /// Pick how to acquire: mostly blocking; try and timed where the lock
    /// has them.
    fn pick_how(rng: &Rng) -> How {
        let r = rng.below(32);
        if L::TRY && r == 0 {
            How::Try
        } else if L::TIMED && r == 1 {
            How::Timed(Duration::ZERO)
        } else if L::TIMED && r <= 3 {
            How::Timed(Duration::from_micros(rng.below(2000)))
        } else {
            How::Block
        }
    }

    fn worker(&self, me: usize, seed: u64) {
        let slot = &*self.slots[me];
        let rng = Rng::new(seed);
        while !self.stop.load(Relaxed) {
            if self.paused.load(Relaxed) {
                slot.set(PAUSED);
                while self.paused.load(Relaxed) && !self.stop.load(Relaxed) {
                    std::thread::sleep(Duration::from_millis(1));
                }
                slot.set(OUTSIDE);
                continue;
            }
            let how = Self::pick_how(&rng);
            let downgrade = slot.role == Role::Writer
                && L::DOWNGRADE
                && how == How::Block
                && rng.below(16) == 0;
            let (mode, timeout) = match how {
                How::Block if downgrade => (M_DOWNGRADE, 0),
                How::Block => (M_BLOCK, 0),
                How::Try => (M_TRY, 0),
                How::Timed(d) => (M_TIMED, d.as_nanos() as u64),
            };
            slot.mode.store(mode, Relaxed);
            slot.timeout.store(timeout, Relaxed);
            slot.set(ACQUIRING);
            let got = match slot.role {
                Role::Writer if downgrade => self
                    .lock
                    .write_downgrade(
                        how,
                        || {
                            self.writer_enter(slot);
                            self.writer_body(&rng);
                            let r = self.readers_in.load(Relaxed);
                            if r != 0 {
                                self.fail(Role::Writer, || {
                                    format!(
                                        "{r} reader(s) got in while {} held the lock",
                                        slot.who()
                                    )
                                });
                            }
                            // Become a reader before the downgrade lets readers in.
                            self.readers_in.fetch_add(1, Relaxed);
                            if self.writers_in.fetch_sub(1, Relaxed) != 1 {
                                self.fail(Role::Writer, || {
                                    format!(
                                        "another writer got in while {} held the lock",
                                        slot.who()
                                    )
                                });
                            }
                        },
                        || {
                            self.reader_body(slot, &rng);
                            self.reader_leave(slot);
                        },
                    )
                    .is_some(),
                Role::Writer => self
                    .lock
                    .write(how, || {
                        self.writer_enter(slot);
                        self.writer_body(&rng);
                        self.writer_leave(slot);
                    })
                    .is_some(),
                Role::Reader => self
                    .lock
                    .read(how, || {
                        self.reader_enter(slot);
                        self.reader_body(slot, &rng);
                        self.reader_leave(slot);
                    })
                    .is_some(),
            };
            match how {
                How::Try => {
                    Slot::bump(&slot.tries);
                    if !got {
                        Slot::bump(&slot.try_misses);
                    }
                }
                How::Timed(_) => {
                    Slot::bump(&slot.timed);
                    if !got {
                        Slot::bump(&slot.timeouts);
                    }
                }
                How::Block if downgrade => Slot::bump(&slot.downgrades),
                How::Block => {}
            }
            slot.set(OUTSIDE);
            self.delay_outside(&rng);
        }
    }

    fn role_slots(&self, role: Role) -> impl Iterator<Item = &Slot> {
        self.slots
            .iter()
            .map(|s| &**s)
            .filter(move |s| s.role == role)
    }

    fn total_ops(&self) -> u64 {
        self.slots.iter().map(|s| s.ops.load(Relaxed)).sum()
    }

    /// `Writes: Total: N Max/Min: a/b Fail: 0 …`, the kernel's line.
    fn stat_line(&self, role: Role) -> Option<String> {
        let ops: Vec<u64> = self.role_slots(role).map(|s| s.ops.load(Relaxed)).collect();
        let (&max, &min) = (ops.iter().max()?, ops.iter().min()?);
        let total: u64 = ops.iter().sum();
        let fails = match role {
            Role::Writer => self.write_fails.load(Relaxed),
            Role::Reader => self.read_fails.load(Relaxed),
        };
        let wait = self
            .role_slots(role)
            .map(|s| s.max_wait.load(Relaxed))
            .max()
            .unwrap_or(0);
        Some(format!(
            "{} Total: {total} Max/Min: {max}/{min}{} Fail: {fails}{} Longest wait: {}",
            if role == Role::Writer {
                "Writes:"
            } else {
                "Reads:"
            },
            if max > min.saturating_mul(2) {
                " ???"
            } else {
                ""
            },
            if fails > 0 { " !!!" } else { "" },
            fmt_ns(wait),
        ))
    }

    fn print_stats(&self, elapsed: Duration) {
        for role in [Role::Writer, Role::Reader] {
            if let Some(l) = self.stat_line(role) {
                println!("[{:>7.1}s] {l}", elapsed.as_secs_f64());
            }
        }
    }

    /// Why a thread looks stuck, if it does.
    fn stuck(&self, s: &Slot, now: u64) -> Option<String> {
        let bound = self.cfg.watchdog.as_nanos() as u64;
        let phase = s.phase.load(Relaxed);
        let for_ns = now.saturating_sub(s.since.load(Relaxed));
        let allowed = match phase {
            ACQUIRING => bound + s.timeout.load(Relaxed),
            HOLDING => bound + self.cfg.long_hold.as_nanos() as u64,
            RELEASING => bound,
            _ => return None,
        };
        (for_ns > allowed).then(|| format!("{} {} for {}", s.who(), phase_name(s), fmt_ns(for_ns)))
    }

    /// The watchdog's verdict, and where every thread is.
    fn report_stall(&self, why: &str) {
        println!(
            "!!! watchdog: {why} (bound {}): lost wake-up, deadlock or starvation",
            hd(self.cfg.watchdog)
        );
        self.dump();
    }

    /// Where every thread is.
    fn dump(&self) {
        let now = monotonic_ns();
        println!("Threads (role, phase, for how long, acquisitions):");
        for s in self.slots.iter() {
            let for_ns = now.saturating_sub(s.since.load(Relaxed));
            println!(
                "  {:<10} {:<28} for {:>9}  {} acquisitions",
                s.who(),
                phase_name(s),
                fmt_ns(for_ns),
                s.ops.load(Relaxed)
            );
        }
        println!(
            "Lock state seen by the checks: {} writer(s), {} reader(s) inside",
            self.writers_in.load(Relaxed),
            self.readers_in.load(Relaxed)
        );
    }

    fn print_messages(&self, printed: &mut usize) {
        let m = self.messages.lock().unwrap_or_else(|e| e.into_inner());
        for msg in &m[*printed..] {
            println!("  !!! {msg}");
        }
        *printed = m.len();
    }
}

fn phase_name(s: &Slot) -> String {
    let mode = match s.mode.load(Relaxed) {
        M_TRY => "try",
        M_TIMED => "timed",
        M_DOWNGRADE => "write+downgrade",
        _ => "blocking",
    };
    match s.phase.load(Relaxed) {
        ACQUIRING => format!("acquiring ({mode})"),
        HOLDING => format!("holding ({mode})"),
        RELEASING => "releasing".into(),
        PAUSED => "outside (stutter pause)".into(),
        EXITED => "exited".into(),
        _ => "outside".into(),
    }
}

/// A user-facing duration as the flags take it (`2s`, `500ms`, `0s`).
fn hd(d: Duration) -> humantime::FormattedDuration {
    humantime::format_duration(d)
}

/// `1.23ms`-style duration.
pub fn fmt_ns(ns: u64) -> String {
    match ns {
        0..=999 => format!("{ns}ns"),
        1_000..=999_999 => format!("{:.1}µs", ns as f64 / 1e3),
        1_000_000..=9_999_999_999 => format!("{:.1}ms", ns as f64 / 1e6),
        _ => format!("{:.2}s", ns as f64 / 1e9),
    }
}

/// Run the torture test on a fresh `L`, printing the kernel-style lines as
/// it goes. Returns when the run is over; if the watchdog fired, threads
/// still stuck in the lock are left behind (detached) — the caller should
/// end the process.
pub fn run<L: TortureLock>(cfg: &Config) -> Outcome {
    let nreaders = if L::SHARED { cfg.nreaders } else { 0 };
    let mut slots = Vec::new();
    slots.extend((0..cfg.nwriters).map(|i| CachePadded::new(Slot::new(Role::Writer, i))));
    slots.extend((0..nreaders).map(|i| CachePadded::new(Slot::new(Role::Reader, i))));
    let sh = Arc::new(Shared {
        lock: L::new(),
        cfg: cfg.clone(),
        writers_in: CachePadded::new(AtomicU32::new(0)),
        readers_in: CachePadded::new(AtomicU32::new(0)),
        data: CachePadded::new(AtomicU64::new(0)),
        max_readers_in: AtomicU32::new(0),
        write_fails: AtomicU64::new(0),
        read_fails: AtomicU64::new(0),
        messages: Mutex::new(Vec::new()),
        stop: AtomicBool::new(false),
        paused: AtomicBool::new(false),
        next_long_hold: AtomicU64::new(monotonic_ns() + 300_000_000),
        slots,
    });
    let mut mixes = Vec::new();
    if L::TRY {
        mixes.push("try");
    }
    if L::TIMED {
        mixes.push("timed");
    }
    if L::DOWNGRADE {
        mixes.push("downgrade");
    }
    println!(
        "klock torture --type {}: {} writers, {} readers, {}; long hold {}, stutter {}, watchdog {}; owner-running oracle {}; mixes in: blocking{}{}",
        cfg.type_name,
        cfg.nwriters,
        nreaders,
        hd(cfg.duration),
        hd(cfg.long_hold),
        if cfg.stutter.is_zero() {
            "off".to_string()
        } else {
            format!("{} run / {} pause", hd(cfg.stutter), hd(cfg.stutter / 4))
        },
        hd(cfg.watchdog),
        klock::oncpu::oracle_kind().map_or("custom", |k| k.name()),
        if mixes.is_empty() { "" } else { ", " },
        mixes.join(", ")
    );
    let seed = monotonic_ns();
    let handles: Vec<JoinHandle<()>> = (0..sh.slots.len())
        .map(|i| {
            let sh = sh.clone();
            let who = sh.slots[i].who();
            std::thread::Builder::new()
                .name(format!("torture-{}", who.replace(' ', "-")))
                .spawn(move || {
                    let r = catch_unwind(AssertUnwindSafe(|| {
                        sh.worker(i, seed ^ (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15))
                    }));
                    let slot = &sh.slots[i];
                    if r.is_err() {
                        sh.fail(slot.role, || format!("{} panicked", slot.who()));
                    }
                    slot.set(EXITED);
                })
                .expect("spawn torture thread")
        })
        .collect();

    // The control loop: statistics, stutter, watchdog.
    let start = monotonic_ns();
    let ns = |d: Duration| d.as_nanos() as u64;
    let end = start + ns(cfg.duration);
    let tick = Duration::from_millis(10);
    let mut next_stat = start + ns(cfg.stat_interval);
    let mut next_stutter = if cfg.stutter.is_zero() {
        u64::MAX
    } else {
        start + ns(cfg.stutter)
    };
    let (mut last_total, mut last_progress) = (0, start);
    let mut printed = 0;
    let mut stall: Option<String> = None;
    loop {
        std::thread::sleep(tick);
        let now = monotonic_ns();
        let elapsed = Duration::from_nanos(now - start);
        if now >= next_stutter {
            let pausing = !sh.paused.load(Relaxed);
            sh.paused.store(pausing, Relaxed);
            next_stutter = now
                + ns(if pausing {
                    cfg.stutter / 4
                } else {
                    cfg.stutter
                });
            if !pausing {
                last_progress = now;
            }
        }
        let total = sh.total_ops();
        if total != last_total {
            (last_total, last_progress) = (total, now);
        } else if !sh.paused.load(Relaxed) && now - last_progress > ns(cfg.watchdog) {
            stall = Some(format!(
                "no lock acquisition by any thread for {}",
                fmt_ns(now - last_progress)
            ));
        }
        if stall.is_none() {
            stall = sh.slots.iter().find_map(|s| sh.stuck(s, now));
        }
        if now >= next_stat && now < end && stall.is_none() {
            sh.print_stats(elapsed);
            sh.print_messages(&mut printed);
            next_stat += ns(cfg.stat_interval);
        }
        if let Some(why) = &stall {
            // Report before the stop, while every thread is still where it
            // got stuck.
            sh.report_stall(why);
            break;
        }
        if now >= end {
            break;
        }
    }
    sh.paused.store(false, Relaxed);
    sh.stop.store(true, Relaxed);

    // Wind down: every thread must leave within the bound.
    if stall.is_none() {
        let deadline = monotonic_ns() + ns(cfg.watchdog);
        while !handles.iter().all(|h| h.is_finished()) {
            let now = monotonic_ns();
            if now > deadline {
                let why = sh
                    .slots
                    .iter()
                    .find_map(|s| sh.stuck(s, now))
                    .unwrap_or_else(|| "a thread did not stop".into());
                let why = format!("after the stop, {why}");
                sh.report_stall(&why);
                stall = Some(why);
                break;
            }
            std::thread::sleep(tick);
        }
    }
    if stall.is_none() {
        for h in handles {
            // Panics were caught and counted inside the thread.
            let _ = h.join();
        }
    }

    let writes: u64 = sh
        .role_slots(Role::Writer)
        .map(|s| s.ops.load(Relaxed))
        .sum();
    let reads: u64 = sh
        .role_slots(Role::Reader)
        .map(|s| s.ops.load(Relaxed))
        .sum();
    // Lost updates only mean something once every writer has left.
    if stall.is_none() {
        let data = sh.data.load(Relaxed);
        if data != writes {
            sh.fail(Role::Writer, || {
                format!("lost updates: the protected counter is {data} after {writes} write acquisitions")
            });
        }
    }
    let elapsed = Duration::from_nanos(monotonic_ns() - start);
    println!("--- Summary after {:.1}s:", elapsed.as_secs_f64());
    sh.print_stats(elapsed);
    sh.print_messages(&mut printed);
    let sum =
        |f: fn(&Slot) -> &AtomicU64| -> u64 { sh.slots.iter().map(|s| f(s).load(Relaxed)).sum() };
    if L::TRY || L::TIMED || L::DOWNGRADE {
        println!(
            "Try: {} attempts, {} missed; Timed: {} attempts, {} timed out; Downgrades: {}",
            sum(|s| &s.tries),
            sum(|s| &s.try_misses),
            sum(|s| &s.timed),
            sum(|s| &s.timeouts),
            sum(|s| &s.downgrades),
        );
    }
    if nreaders > 0 {
        println!(
            "Readers inside at once: at most {}",
            sh.max_readers_in.load(Relaxed)
        );
    }
    let write_fails = sh.write_fails.load(Relaxed);
    let read_fails = sh.read_fails.load(Relaxed);
    let success = stall.is_none() && write_fails == 0 && read_fails == 0;
    println!(
        "--- End of test: {}: --type {} nwriters={} nreaders={} duration={} long_hold={} stutter={} watchdog={}",
        if success { "SUCCESS" } else { "FAILURE" },
        cfg.type_name,
        cfg.nwriters,
        nreaders,
        hd(cfg.duration),
        hd(cfg.long_hold),
        hd(cfg.stutter),
        hd(cfg.watchdog)
    );
    Outcome {
        success,
        stalled: stall.is_some(),
        writes,
        reads,
        write_fails,
        read_fails,
    }
}

#[cfg(test)]
mod tests;
