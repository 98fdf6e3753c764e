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
    // SAFETY: plain syscall on the calling thread.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &p) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Pin the calling thread to CPU `cpu`.
pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    // SAFETY: the set is zeroed and filled with the libc macros; the
    // syscall reads it.
    unsafe {
        let mut set = std::mem::zeroed::<libc::cpu_set_t>();
        libc::CPU_ZERO(&mut set);
        if cpu >= 8 * std::mem::size_of::<libc::cpu_set_t>() {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

/// Whether CPU `cpu` is in the calling thread's allowed set.
pub fn cpu_allowed(cpu: usize) -> bool {
    // SAFETY: the set is filled by the kernel and read with the libc macro.
    unsafe {
        let mut set = std::mem::zeroed::<libc::cpu_set_t>();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return false;
        }
        cpu < 8 * std::mem::size_of::<libc::cpu_set_t>() && libc::CPU_ISSET(cpu, &set)
    }
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
        return Some(
            "SCHED_FIFO is not permitted (needs CAP_SYS_NICE: run as root or grant the capability)"
                .into(),
        );
    }
    if crate::sys::online_cpus() < 2 {
        return Some("needs at least 2 CPUs (one for the real-time threads, one kept free)".into());
    }
    if !cpu_allowed(cpu) {
        return Some(format!("CPU {cpu} is not in this process's CPU set"));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_without_changing_the_caller() {
        let _ = fifo_available();
        // Our own policy is still SCHED_OTHER.
        // SAFETY: plain syscall.
        assert_eq!(unsafe { libc::sched_getscheduler(0) }, libc::SCHED_OTHER);
        assert!(cpu_allowed(0) || !cpu_allowed(0));
        assert!(pin_to_cpu(1 << 20).is_err());
    }
}
