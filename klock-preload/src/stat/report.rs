//! The profile's report: the table printed when the program exits, or
//! when a signal it does not handle ends it.
//!
//! A server under a load test is often stopped with Ctrl-C or `kill`, and
//! a program without a handler for that signal dies without running its
//! exit handlers, so the profile would be lost with it. So while
//! `SIGINT`, `SIGTERM` and `SIGHUP` are left at their default action when
//! the library is loaded, it catches them: the handler prints the profile,
//! restores the default action and raises the signal again, and the
//! program ends as it would have, killed by that signal. A program that
//! installs its own handler replaces this one (and usually exits through
//! `exit`, which prints the profile), and a signal ignored when the
//! program started (`nohup`) stays ignored.
//!
//! A signal handler may run while the interrupted thread holds the
//! allocator's or the dynamic linker's lock, so the report is made of
//! async-signal-safe steps only, at exit as at a signal: the rows are
//! copied into memory set aside at load and sorted in place; the text is
//! formatted with `core::fmt` into a fixed buffer and written to fd 2
//! (or to the file `KLOCK_STAT_FILE` names, opened with `open`) with
//! `write`; where a lock was first taken was looked up (`dladdr`)
//! when its row was claimed. The kernel's lock_stat layout, which is built
//! as a string, follows only at a normal exit, as do the names of the
//! functions that `dladdr` does not know ([`super::symbols`]).

use super::{
    monotonic_ns, now, on, table, Kind, Site, CAPACITY, FIRST_PID, FORWARDED_AT_FORK, HOLD_SHIFT,
    TOP,
};
use core::cell::UnsafeCell;
use core::fmt::Write as _;
use core::sync::atomic::AtomicBool;
use core::sync::atomic::Ordering::{Acquire, Relaxed};

/// A snapshot of one row, in ns.
#[derive(Clone, Copy, Default)]
pub(super) struct Line {
    kind: u8,
    site: Site,
    locked: u64,
    changed: u64,
    contended: u64,
    con_bounces: u64,
    wait_total: f64,
    wait_min: f64,
    wait_max: f64,
    holds: u64,
    hold_total: f64,
    hold_min: f64,
    hold_max: f64,
}

/// Text on its way to stderr, or to the profile file
/// (`KLOCK_STAT_FILE`): a fixed buffer, written out with `write` when full
/// and at the end. No allocation, no lock.
struct Out {
    buf: [u8; 4096],
    len: usize,
    /// The profile file opened by [`Out::begin`]; `None`: stderr.
    file: Option<rustix::fd::OwnedFd>,
}

impl Out {
    /// Start a report of process `pid`: open the profile file, if one was
    /// asked for, or write to stderr, saying so first if the file cannot
    /// be opened. Called only once something is to be written, so that a
    /// process that reports nothing makes no file.
    fn begin(&mut self, pid: u32) {
        self.file = None;
        let Some(template) = super::STAT_FILE.get() else {
            return;
        };
        let mut path = FilePath::new();
        let made = path.expand(template, pid);
        let opened = made.and_then(|p| {
            rustix::fs::open(
                p,
                rustix::fs::OFlags::WRONLY
                    | rustix::fs::OFlags::CREATE
                    | rustix::fs::OFlags::APPEND
                    | rustix::fs::OFlags::CLOEXEC,
                rustix::fs::Mode::from_raw_mode(0o644),
            )
            .ok()
        });
        match opened {
            Some(fd) => self.file = Some(fd),
            None => {
                self.bytes(b"\nklock: cannot open the profile file ");
                self.bytes(path.shown());
                self.bytes(b" (KLOCK_STAT_FILE): the profile follows here\n");
            }
        }
    }

    /// Write out the rest and close the profile file, if it was opened.
    fn end(&mut self) {
        self.flush();
        self.file = None;
    }

    fn flush(&mut self) {
        let mut rest = &self.buf[..self.len];
        let fd = match &self.file {
            Some(f) => rustix::fd::AsFd::as_fd(f),
            // SAFETY: fd 2 stays open for the call (a program that closed
            // it gets EBADF, and the report is lost, as eprintln's would
            // be).
            None => unsafe { rustix::fd::BorrowedFd::borrow_raw(2) },
        };
        while !rest.is_empty() {
            match rustix::io::write(fd, rest) {
                Ok(0) => break,
                Ok(n) => rest = &rest[n..],
                Err(rustix::io::Errno::INTR) => {}
                Err(_) => break,
            }
        }
        self.len = 0;
    }

    fn bytes(&mut self, mut b: &[u8]) {
        while !b.is_empty() {
            if self.len == self.buf.len() {
                self.flush();
            }
            let n = b.len().min(self.buf.len() - self.len);
            self.buf[self.len..self.len + n].copy_from_slice(&b[..n]);
            self.len += n;
            b = &b[n..];
        }
    }
}

impl core::fmt::Write for Out {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        self.bytes(s.as_bytes());
        Ok(())
    }
}

/// The profile file's path for one process, built without allocating:
/// the template of `KLOCK_STAT_FILE` with each `%p` replaced by the pid.
struct FilePath {
    buf: [u8; 4352],
    len: usize,
}

impl FilePath {
    fn new() -> Self {
        Self {
            buf: [0; 4352],
            len: 0,
        }
    }

    /// Build the path of process `pid` from `template` (checked at load:
    /// absolute, no NUL byte); `None` if it does not fit.
    fn expand(&mut self, template: &[u8], pid: u32) -> Option<&core::ffi::CStr> {
        let mut rest = template;
        while let Some(&c) = rest.first() {
            if let Some(tail) = rest.strip_prefix(b"%p") {
                write!(self, "{pid}").ok()?;
                rest = tail;
            } else {
                self.push(&[c])?;
                rest = &rest[1..];
            }
        }
        self.buf[self.len] = 0;
        core::ffi::CStr::from_bytes_with_nul(&self.buf[..=self.len]).ok()
    }

    /// Append `b`, keeping room for the NUL; `None` if it does not fit.
    fn push(&mut self, b: &[u8]) -> Option<()> {
        let end = self.len + b.len();
        if end >= self.buf.len() {
            return None;
        }
        self.buf[self.len..end].copy_from_slice(b);
        self.len = end;
        Some(())
    }

    /// The path built so far, for a message.
    fn shown(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl core::fmt::Write for FilePath {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        self.push(s.as_bytes()).ok_or(core::fmt::Error)
    }
}

/// The memory a report works in, set aside at load: one report runs at
/// a time (see [`REPORTING`]).
pub(super) struct Scratch {
    lines: UnsafeCell<&'static mut [Line]>,
    out: UnsafeCell<Out>,
}

// SAFETY: only the one report that set REPORTING touches the cells.
unsafe impl Sync for Scratch {}

impl Scratch {
    pub(super) fn new() -> Self {
        Self {
            // SAFETY: all-zero bytes are a valid `Line` (integers, 0.0,
            // `false`, a site of zeros). Zeroed pages: a process that
            // never reports does not touch them.
            lines: UnsafeCell::new(unsafe { super::zeroed_static(CAPACITY) }),
            out: UnsafeCell::new(Out {
                buf: [0; 4096],
                len: 0,
                file: None,
            }),
        }
    }
}

/// Set by the first report of this process: a signal during the report at
/// exit, or a second signal, does not start another.
static REPORTING: AtomicBool = AtomicBool::new(false);

/// At load, with the profile on: catch `SIGINT`, `SIGTERM` and `SIGHUP`
/// where they are at their default action ([`crate::signal`], which also
/// keeps the handler out of the program's sight).
pub(super) fn catch_fatal_signals() {
    crate::signal::catch(on_fatal_signal);
}

/// The handler: print the profile, then end the process by the signal,
/// as its default action would have.
extern "C" fn on_fatal_signal(sig: libc::c_int) {
    report_at(Some(sig));
    crate::signal::restore_default(sig);
    // SAFETY: raise is async-signal-safe. The signal is blocked while
    // this handler runs: raised now, it is delivered, with its default
    // action, when the handler returns.
    unsafe { libc::raise(sig) };
}

/// Print the profile to stderr (the library's destructor calls it at
/// exit).
pub(crate) fn report() {
    report_at(None);
}

/// The signal's name, for the header.
fn signal_name(sig: libc::c_int) -> &'static str {
    match sig {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        libc::SIGHUP => "SIGHUP",
        _ => "a signal",
    }
}

/// The report, at exit (`signal` `None`) or in the handler of `signal`.
fn report_at(signal: Option<libc::c_int>) {
    if !on() || REPORTING.swap(true, Relaxed) {
        return;
    }
    let t = table();
    // SAFETY: REPORTING makes this the only report of the process.
    let (lines, out) = unsafe { (&mut *t.scratch.lines.get(), &mut *t.scratch.out.get()) };
    let ns_per_unit = {
        let (u0, n0) = t.t0;
        let (du, dn) = (now().saturating_sub(u0), monotonic_ns().saturating_sub(n0));
        if du == 0 || dn == 0 {
            1.0
        } else {
            dn as f64 / du as f64
        }
    };
    let mut n = 0;
    for i in t.claimed_rows() {
        let r = &t.rows[i];
        if !r.ready.load(Acquire) || r.locked.load(Relaxed) == 0 {
            continue;
        }
        let ns = |c: &core::sync::atomic::AtomicU64| c.load(Relaxed) as f64 * ns_per_unit;
        lines[n] = Line {
            kind: r.kind.load(Relaxed),
            site: t.sites[i].get(),
            locked: r.locked.load(Relaxed),
            changed: r.changed.load(Relaxed),
            contended: r.contended.load(Relaxed),
            con_bounces: r.con_bounces.load(Relaxed),
            wait_total: ns(&r.wait_total),
            wait_min: ns(&r.wait_min),
            wait_max: ns(&r.wait_max),
            holds: r.holds.load(Relaxed),
            hold_total: ns(&r.hold_total),
            hold_min: ns(&r.hold_min),
            hold_max: ns(&r.hold_max),
        };
        n += 1;
    }
    let lines = &mut lines[..n];
    // In place: `sort_unstable_by` allocates nothing.
    lines.sort_unstable_by(|a, b| {
        b.wait_total
            .total_cmp(&a.wait_total)
            .then(b.contended.cmp(&a.contended))
            .then(b.locked.cmp(&a.locked))
    });
    let top = TOP.load(Relaxed);
    let sample = 1u64 << HOLD_SHIFT.load(Relaxed);
    let pid = rustix::process::getpid().as_raw_nonzero().get() as u32;
    let fwd = crate::klock_preload_forwarded().saturating_sub(FORWARDED_AT_FORK.load(Relaxed));
    // `, ended by SIGTERM` in the header when a signal ends the process.
    let (ended, by) = signal.map_or(("", ""), |s| (", ended by ", signal_name(s)));
    // Of the processes that took no lock only the first one says so (in
    // one line: the profile was on): a shell script, `make` or a wrapper
    // starts many processes that take none, and a table from each of them
    // buried the profile that mattered.
    if lines.is_empty() {
        if pid == FIRST_PID.load(Relaxed) || fwd > 0 {
            out.begin(pid);
            out.bytes(b"\nklock: lock profile of ");
            out.bytes(&t.prog);
            let _ = writeln!(out, " (pid {pid}{ended}{by}): no lock used");
            forwarded_line(out, fwd);
            out.end();
        }
        return;
    }
    out.begin(pid);
    let contended = lines.iter().filter(|l| l.contended > 0).count();
    let timed: u64 = lines.iter().map(|l| l.holds).sum();
    out.bytes(b"\nklock: lock profile of ");
    out.bytes(&t.prog);
    let _ = write!(
        out,
        " (pid {pid}{ended}{by}): {} locks used, {contended} contended; sorted by total wait; \
         wait times in ms and us, holds (exclusive only) in us, ",
        lines.len(),
    );
    let _ = if sample == 1 {
        writeln!(out, "every hold timed ({timed})")
    } else {
        writeln!(
            out,
            "1 hold in {sample} timed after each lock's first {sample} ({timed})"
        )
    };
    let mut symbols = signal.is_none().then(super::symbols::Symbols::default);
    // The column titles, aligned as the rows below are.
    out.bytes(
        b"Lock Type         Locked    Changed      Cont. tot.Wait[ms]   avgW[us]   \
          maxW[us]   avgH[us]   maxH[us]  Site (first locked at)\n",
    );
    for (i, l) in lines.iter().take(top).enumerate() {
        let avg_w = if l.contended > 0 {
            l.wait_total / l.contended as f64
        } else {
            0.0
        };
        let avg_h = if l.holds > 0 {
            l.hold_total / l.holds as f64
        } else {
            0.0
        };
        let _ = write!(
            out,
            "{:>4} {:<6} {:>12} {:>10} {:>10} {:>12.3} {:>10.2} {:>10.2} {:>10.3} {:>10.2}  ",
            i + 1,
            Kind::name(l.kind),
            l.locked,
            l.changed,
            l.contended,
            l.wait_total / 1e6,
            avg_w / 1e3,
            l.wait_max / 1e3,
            avg_h / 1e3,
            l.hold_max / 1e3,
        );
        // At a normal exit only: reading a symbol table allocates.
        let function = symbols.as_mut().and_then(|s| s.function(&l.site));
        l.site.describe(function.as_deref(), out);
        out.bytes(b"\n");
    }
    let shown = &lines[..lines.len().min(top)];
    if signal.is_none() {
        // Built as a string: at exit only (see the module docs).
        out.bytes(kernel_layout(shown, sample).as_bytes());
    } else {
        out.bytes(b"klock: (the kernel's lock_stat layout is printed at a normal exit only)\n");
    }
    let untracked = t.untracked.load(Relaxed);
    if untracked > 0 {
        let _ = writeln!(
            out,
            "klock: {untracked} acquisitions not tracked (the profile's table holds {CAPACITY} locks and was full where theirs would go)"
        );
    }
    events_line(out);
    forwarded_line(out, fwd);
    out.end();
}

/// klock's own event counters (`klock::events`: what the locks' slow
/// paths did, summed over this process's locks), the nonzero ones, by
/// lock type. Without allocating (the report may run in a signal
/// handler).
fn events_line(out: &mut Out) {
    use klock::events::{read, LockType};
    let mut any = false;
    for &t in LockType::ALL {
        let mut named = false;
        for &e in t.events() {
            let n = read(e);
            if n == 0 {
                continue;
            }
            if !any {
                let _ = write!(out, "klock: lock events (klock::events, all locks):");
                any = true;
            }
            if !named {
                let _ = write!(out, " {}", t.name());
                named = true;
            }
            let _ = write!(out, " {}={n}", e.name());
        }
        if named {
            let _ = write!(out, ";");
        }
    }
    if any {
        let _ = writeln!(out);
    }
}

fn forwarded_line(out: &mut Out, fwd: u64) {
    if fwd > 0 {
        let _ = writeln!(
            out,
            "klock: {fwd} calls forwarded to glibc (process-shared, robust or priority mutexes; not profiled)"
        );
    }
}

/// The same locks in the kernel's `/proc/lock_stat` layout (the one `klock
/// stat` prints for Rust programs), each named by its type and its rank in
/// the table above. A lock's read and write acquisitions are counted
/// together, on one line; hold times are those of exclusive holds, the
/// total estimated from the timed ones (`sample`: one hold in that many
/// was timed).
fn kernel_layout(lines: &[Line], sample: u64) -> String {
    use klock::lockstat::{ClassStats, Report, SideStats};
    let ns = |v: f64| v.round() as u64;
    let classes = lines
        .iter()
        .enumerate()
        .map(|(i, l)| ClassStats {
            name: format!("{} {}", Kind::name(l.kind), i + 1),
            write: SideStats {
                acquisitions: l.locked,
                acq_bounces: l.changed,
                contentions: l.contended,
                con_bounces: l.con_bounces,
                rejects: 0,
                wait_min_ns: ns(l.wait_min),
                wait_max_ns: ns(l.wait_max),
                wait_total_ns: ns(l.wait_total),
                hold_min_ns: ns(l.hold_min),
                hold_max_ns: ns(l.hold_max),
                hold_total_ns: ns(l.hold_total * sample as f64),
            },
            read: SideStats::default(),
            sites: Vec::new(),
            elapsed_ns: 0,
        })
        .collect();
    let report = Report {
        classes,
        cpus: klock::sys::online_cpus(),
    };
    format!(
        "\nklock: the same locks in the kernel's lock_stat layout (times in us)\n{}",
        report.proc_lock_stat()
    )
}
