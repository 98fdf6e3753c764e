//! Real-time scheduling helpers for programs (and klock's own tests and
//! benchmarks) that use [`crate::RtMutex`]: put the calling thread under
//! `SCHED_FIFO`, back to `SCHED_OTHER`, pin it to a CPU, and find out
//! whether the process may use `SCHED_FIFO` at all.
//!
//! Priority inheritance only matters between threads of different
//! real-time priorities; these are the few calls needed to set that up.
//! They act on the **calling thread** only.
//!
//! ```no_run
//! if klock::rt::fifo_available() {
//!     std::thread::spawn(|| {
//!         klock::rt::pin_to_cpu(1).unwrap();
//!         klock::rt::set_fifo(10).unwrap();
//!         // ... real-time work, bounded in time ...
//!         klock::rt::set_normal().unwrap();
//!     });
//! }
//! ```

use std::io;

/// Put the calling thread under `SCHED_FIFO` at `priority` (1..=99).
/// Fails with `EPERM` without `CAP_SYS_NICE` (or an RT rlimit).
pub fn set_fifo(priority: i32) -> io::Result<()> {
    let p = libc::sched_param {
        sched_priority: priority,
    };
    // libc: rustix has no sched_setscheduler (it leaves scheduling policy
    // to the C library).
    // SAFETY: plain syscall; pid 0 is the calling thread on Linux.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Put the calling thread back under `SCHED_OTHER`.
pub fn set_normal() -> io::Result<()> {
    let p = libc::sched_param { sched_priority: 0 };
    // libc: rustix has no sched_setscheduler.
    // SAFETY: plain syscall on the calling thread.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &p) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Pin the calling thread to CPU `cpu`.
pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    use rustix::thread::CpuSet;
    if cpu >= CpuSet::MAX_CPU {
        return Err(rustix::io::Errno::INVAL.into());
    }
    let mut set = CpuSet::new();
    set.set(cpu);
    rustix::thread::sched_setaffinity(None, &set).map_err(io::Error::from)
}

/// Whether the calling thread has a real-time policy (`SCHED_FIFO`, `RR`
/// or `DEADLINE`). One syscall; not cached, since the policy may change
/// at any time.
pub fn is_realtime() -> bool {
    /// `SCHED_DEADLINE` (not in every libc).
    const SCHED_DEADLINE: i32 = 6;
    /// `SCHED_RESET_ON_FORK`, which the kernel reports ORed in.
    const RESET_ON_FORK: i32 = 0x4000_0000;
    // libc: rustix has no sched_getscheduler.
    // SAFETY: no pointers; 0 names the calling thread.
    let p = unsafe { libc::sched_getscheduler(0) } & !RESET_ON_FORK;
    p == libc::SCHED_FIFO || p == libc::SCHED_RR || p == SCHED_DEADLINE
}

/// The CPUs in the calling thread's allowed set, in ascending order (one
/// syscall; empty if the kernel refuses to say).
pub fn allowed_cpus() -> Vec<usize> {
    use rustix::thread::CpuSet;
    match rustix::thread::sched_getaffinity(None) {
        Ok(set) => (0..CpuSet::MAX_CPU).filter(|&c| set.is_set(c)).collect(),
        Err(_) => Vec::new(),
    }
}

/// Whether CPU `cpu` is in the calling thread's allowed set.
pub fn cpu_allowed(cpu: usize) -> bool {
    allowed_cpus().contains(&cpu)
}

/// Whether this process may use `SCHED_FIFO`: a real `sched_setscheduler`
/// attempt, made on a short-lived helper thread (the caller's policy is
/// untouched). The answer is cached.
pub fn fifo_available() -> bool {
    static OK: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *OK.get_or_init(|| {
        std::thread::spawn(|| {
            let ok = set_fifo(1).is_ok();
            if ok {
                let _ = set_normal();
            }
            ok
        })
        .join()
        .unwrap_or(false)
    })
}

/// Why real-time tests and the `pi` benchmark cannot run here, or `None`
/// if they can: `SCHED_FIFO` must be allowed and CPU `cpu` (the one the
/// real-time threads are pinned to) must be usable while another CPU stays
/// free.
pub fn rt_unavailable_reason(cpu: usize) -> Option<String> {
    if !fifo_available() {
        return Some(fifo_refusal_reason(has_cap_sys_nice(), &own_cgroup()));
    }
    if crate::sys::online_cpus() < 2 {
        return Some("needs at least 2 CPUs (one for the real-time threads, one kept free)".into());
    }
    if !cpu_allowed(cpu) {
        return Some(format!("CPU {cpu} is not in this process's CPU set"));
    }
    None
}

/// Why `SCHED_FIFO` was refused: without `CAP_SYS_NICE` that is the
/// reason; with it, the kernel's real-time group scheduling
/// (`CONFIG_RT_GROUP_SCHED`) gave the process's cgroup no real-time
/// budget (seen on a VM whose jobs run in a child cgroup).
fn fifo_refusal_reason(cap_sys_nice: bool, cgroup: &str) -> String {
    if !cap_sys_nice {
        return "SCHED_FIFO is not permitted (needs CAP_SYS_NICE: run as root or grant the capability)"
            .into();
    }
    format!(
        "SCHED_FIFO is refused although the process has CAP_SYS_NICE: the kernel schedules \
         real-time threads per cgroup (CONFIG_RT_GROUP_SCHED) and this process's cgroup \
         ({cgroup}) has no real-time budget; run from the root cgroup (as root: \
         `echo $$ > /sys/fs/cgroup/cgroup.procs` in the shell that starts it) or give the \
         cgroup a budget (cgroup v1: cpu.rt_runtime_us)"
    )
}

/// Whether `CAP_SYS_NICE` (bit 23) is in the effective capability set.
fn has_cap_sys_nice() -> bool {
    const CAP_SYS_NICE: u32 = 23;
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|st| {
            let hex = st
                .lines()
                .find_map(|l| l.strip_prefix("CapEff:"))?
                .trim()
                .to_owned();
            u64::from_str_radix(&hex, 16).ok()
        })
        .is_some_and(|caps| caps & (1 << CAP_SYS_NICE) != 0)
}

/// The process's cgroup (v2 line of /proc/self/cgroup), for messages.
fn own_cgroup() -> String {
    std::fs::read_to_string("/proc/self/cgroup")
        .ok()
        .and_then(|c| {
            c.lines()
                .find_map(|l| l.strip_prefix("0::").map(str::to_owned))
        })
        .unwrap_or_else(|| "unknown".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_without_changing_the_caller() {
        let _ = fifo_available();
        // Our own policy is still SCHED_OTHER.
        // libc: rustix has no sched_getscheduler.
        // SAFETY: plain syscall.
        assert_eq!(unsafe { libc::sched_getscheduler(0) }, libc::SCHED_OTHER);
        assert!(!is_realtime());
        assert!(pin_to_cpu(1 << 20).is_err());
    }

    #[test]
    fn pinning_shows_in_the_allowed_set() {
        let all = allowed_cpus();
        let first = *all.first().expect("no CPU allowed");
        assert!(all.iter().all(|&c| cpu_allowed(c)));
        // On a helper thread: pinning would stay with the test thread.
        std::thread::spawn(move || {
            pin_to_cpu(first).unwrap();
            assert_eq!(allowed_cpus(), vec![first]);
            assert!(all.iter().all(|&c| cpu_allowed(c) == (c == first)));
        })
        .join()
        .unwrap();
    }

    #[test]
    fn fifo_is_realtime() {
        if !fifo_available() {
            return; // nothing to check without the privilege
        }
        std::thread::spawn(|| {
            set_fifo(10).unwrap();
            assert!(is_realtime());
            set_normal().unwrap();
            assert!(!is_realtime());
        })
        .join()
        .unwrap();
    }

    #[test]
    fn refusal_reason_names_the_cause() {
        assert!(fifo_refusal_reason(false, "/").contains("needs CAP_SYS_NICE"));
        let r = fifo_refusal_reason(true, "/jobs/42");
        assert!(
            r.contains("CONFIG_RT_GROUP_SCHED") && r.contains("/jobs/42"),
            "{r}"
        );
        // Root here and in CI: the capability is seen.
        if rustix::process::geteuid().is_root() {
            assert!(has_cap_sys_nice());
        }
    }
}
