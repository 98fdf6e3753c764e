//! The calling thread's kernel tid as glibc keeps it, in its thread
//! descriptor at a fixed offset from the thread pointer (x86-64 Linux;
//! glibc's own error-checking and recursive mutexes read it there). For
//! klock's shared libraries: see [`crate::thread::glibc_descriptor_tid`].

/// The tid's offset from the thread pointer in glibc's `struct pthread`
/// (x86-64, glibc 2.26 and later).
const OFFSET: usize = 0x2d0;

/// The 4 bytes at [`OFFSET`] from the thread pointer.
#[inline(always)]
pub(crate) fn read() -> u32 {
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

#[cfg(test)]
mod tests {
    /// On this (glibc) target every thread finds its own tid there.
    #[test]
    fn glibc_keeps_each_threads_tid_where_we_read_it() {
        assert!(crate::thread::glibc_descriptor_tid_checks());
        assert_eq!(super::read(), crate::sys::gettid_uncached());
        let (mine, read) = std::thread::spawn(|| (crate::sys::gettid_uncached(), super::read()))
            .join()
            .unwrap();
        assert_eq!(read, mine);
    }
}
