//! The calling thread's kernel tid as glibc keeps it, in its thread
//! descriptor at a fixed offset from the thread pointer (x86-64 Linux;
//! glibc's own error-checking and recursive mutexes read it there), for
//! klock's shared libraries (`libklock.so`, `libklock_preload.so`):
//! there a thread-local, such as [`crate::thread::current_tid`]'s cache,
//! is reached through a `__tls_get_addr` call, which made up a third of
//! an uncontended C-API mutex pair. An executable's thread-locals cost
//! one `%fs`-relative load already, so `current_tid` keeps its cache.
//! Re-exported (hidden) from [`crate::thread`].

/// The tid's offset from the thread pointer in glibc's `struct pthread`
/// (x86-64, glibc 2.26 and later).
const OFFSET: usize = 0x2d0;

/// The 4 bytes at [`OFFSET`] from the thread pointer.
#[inline(always)]
fn read() -> u32 {
    let tid: u32;
    // SAFETY: on x86-64 Linux with glibc, %fs points at the calling
    // thread's descriptor, which is larger than the offset; a read only.
    unsafe {
        core::arch::asm!(
            "mov {0:e}, dword ptr fs:[{1}]",
            out(reg) tid,
            const OFFSET,
            options(nostack, readonly, preserves_flags)
        )
    };
    tid
}

/// The tid glibc keeps in the calling thread's descriptor, *unchecked*:
/// use it only where [`glibc_descriptor_tid_checks`] said yes in this
/// process. The caller keeps that answer in a static of its own (a
/// static of this crate is reached through the GOT from a shared
/// library).
#[inline(always)]
pub fn glibc_descriptor_tid() -> u32 {
    read()
}

/// Whether [`glibc_descriptor_tid`] reads the calling thread's tid in
/// this process (compared with `gettid`; another C library, or a glibc
/// that moved the field, says no).
pub fn glibc_descriptor_tid_checks() -> bool {
    read() == crate::sys::gettid_uncached()
}

#[cfg(test)]
mod tests {
    /// On this (glibc) target every thread finds its own tid there.
    #[test]
    fn glibc_keeps_each_threads_tid_where_we_read_it() {
        assert!(super::glibc_descriptor_tid_checks());
        assert_eq!(super::read(), crate::sys::gettid_uncached());
        let (mine, read) = std::thread::spawn(|| (crate::sys::gettid_uncached(), super::read()))
            .join()
            .unwrap();
        assert_eq!(read, mine);
    }
}
