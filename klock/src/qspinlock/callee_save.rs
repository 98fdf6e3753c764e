//! x86-64: the paravirt fast path's calls, made through a callee-save
//! thunk.
//!
//! The fast path is inlined into its caller, and it holds calls it almost
//! never makes: the slow path, the give-back when someone holds pending,
//! the first count of a steal, a slow-path owner's unlock. An ordinary
//! call tells the compiler that every caller-saved register dies there,
//! so the caller's loop keeps fewer values in registers across the lock
//! and spills and reloads around it *on every iteration*, the call taken
//! or not. The kernel's paravirt spinlock has the same problem with its
//! `pv_*` hooks and calls them through thunks that save every register the
//! C convention lets a callee clobber; here, too, [`call`] goes through
//! such a thunk ([`save_call`]), which saves the general-purpose registers
//! itself, so the only ones its inline-assembly call site gives up are
//! `rax` (the result) and the vector, mask and x87 registers (which
//! integer code around a lock does not hold).
//!
//! ```text
//! caller:    call save_call          rax = f, rdi/rsi = its arguments
//! save_call: push rcx rdx rsi rdi r8 r9 r10 r11 (+8: the stack aligned)
//!            call rax                an `extern "C"` Rust function
//!            pop them; ret           rax = what it returned
//! ```
//!
//! Measured on a 2-vCPU AMD EPYC guest (family 25, model 1) in `klock
//! bench uncontended`: the `SpinLock` pair 4.1–4.2 ns against 5.0 with
//! ordinary calls (docs/locks/spinlock.md, "Calls that clobber nothing").

use super::{FastTry, LockWord, RawQSpinLockWith, TOKEN_SLOW_OWNER};

/// Save the caller-saved general-purpose registers but `rax`, call the
/// function whose address is in `rax` (System V: arguments in `rdi`,
/// `rsi`), restore them and return its `rax`.
#[unsafe(naked)]
unsafe extern "C" fn save_call() {
    core::arch::naked_asm!(
        ".cfi_startproc",
        "push rcx",
        ".cfi_adjust_cfa_offset 8",
        "push rdx",
        ".cfi_adjust_cfa_offset 8",
        "push rsi",
        ".cfi_adjust_cfa_offset 8",
        "push rdi",
        ".cfi_adjust_cfa_offset 8",
        "push r8",
        ".cfi_adjust_cfa_offset 8",
        "push r9",
        ".cfi_adjust_cfa_offset 8",
        "push r10",
        ".cfi_adjust_cfa_offset 8",
        "push r11",
        ".cfi_adjust_cfa_offset 8",
        // Entered with rsp = 8 mod 16 (our caller's call pushed 8), eight
        // pushes keep that: 8 more, and the callee is entered as the ABI
        // says, at 8 mod 16 after its own call.
        "sub rsp, 8",
        ".cfi_adjust_cfa_offset 8",
        "call rax",
        "add rsp, 8",
        ".cfi_adjust_cfa_offset -8",
        "pop r11",
        ".cfi_adjust_cfa_offset -8",
        "pop r10",
        ".cfi_adjust_cfa_offset -8",
        "pop r9",
        ".cfi_adjust_cfa_offset -8",
        "pop r8",
        ".cfi_adjust_cfa_offset -8",
        "pop rdi",
        ".cfi_adjust_cfa_offset -8",
        "pop rsi",
        ".cfi_adjust_cfa_offset -8",
        "pop rdx",
        ".cfi_adjust_cfa_offset -8",
        "pop rcx",
        ".cfi_adjust_cfa_offset -8",
        "ret",
        ".cfi_endproc",
    )
}

/// `f(a, b)` through [`save_call`]: the call site loses only `rax` of the
/// general-purpose registers.
///
/// # Safety
/// `f` must be safe to call with `a` and `b`. It must not unwind (an
/// `extern "C"` function aborts instead).
#[inline(always)]
unsafe fn call(f: extern "C" fn(usize, usize) -> usize, a: usize, b: usize) -> usize {
    let r: usize;
    // SAFETY: `save_call` preserves every general-purpose register but
    // rax, and the stack pointer; the block is not `nostack`, so the stack
    // is aligned for a call and the red zone free. What `f` may clobber
    // beyond that, every vector, mask and x87 register (`clobber_abi("C")`
    // without its integer part), is declared. Not `nomem`: `f` takes and
    // releases the lock, so memory accesses must not move across it.
    unsafe {
        core::arch::asm!(
            "call {thunk}",
            thunk = sym save_call,
            inout("rax") f as usize => r,
            in("rdi") a,
            in("rsi") b,
            out("xmm0") _, out("xmm1") _, out("xmm2") _, out("xmm3") _,
            out("xmm4") _, out("xmm5") _, out("xmm6") _, out("xmm7") _,
            out("xmm8") _, out("xmm9") _, out("xmm10") _, out("xmm11") _,
            out("xmm12") _, out("xmm13") _, out("xmm14") _, out("xmm15") _,
            out("zmm16") _, out("zmm17") _, out("zmm18") _, out("zmm19") _,
            out("zmm20") _, out("zmm21") _, out("zmm22") _, out("zmm23") _,
            out("zmm24") _, out("zmm25") _, out("zmm26") _, out("zmm27") _,
            out("zmm28") _, out("zmm29") _, out("zmm30") _, out("zmm31") _,
            out("k1") _, out("k2") _, out("k3") _, out("k4") _,
            out("k5") _, out("k6") _, out("k7") _,
            out("mm0") _, out("mm1") _, out("mm2") _, out("mm3") _,
            out("mm4") _, out("mm5") _, out("mm6") _, out("mm7") _,
            out("st(0)") _, out("st(1)") _, out("st(2)") _, out("st(3)") _,
            out("st(4)") _, out("st(5)") _, out("st(6)") _, out("st(7)") _,
            out("tmm0") _, out("tmm1") _, out("tmm2") _, out("tmm3") _,
            out("tmm4") _, out("tmm5") _, out("tmm6") _, out("tmm7") _,
        );
    }
    r
}

/// Paravirt only (`lock_with` and the unlocks call these only then).
impl<const PL: u32, const PARAVIRT: bool, W: LockWord> RawQSpinLockWith<PL, PARAVIRT, W> {
    /// The paravirt acquisition: the fast path's steps
    /// ([`pv_fast_try`](Self::pv_fast_try)) inline, everything they lead
    /// to in [`lock_cold`](Self::lock_cold) through the thunk. Returns the
    /// acquisition token, as `lock_with` does.
    #[inline(always)]
    pub(super) fn pv_lock_saving<const MODE: u8, const LAZY: bool>(&self) -> usize {
        let state = match self.pv_fast_try::<MODE>() {
            FastTry::Plain => return 0,
            other => other as usize,
        };
        // SAFETY: `lock_cold` takes the lock this points to; it does not
        // unwind.
        unsafe {
            call(
                Self::lock_cold::<MODE, LAZY>,
                self as *const Self as usize,
                state,
            )
        }
    }

    /// What the fast path's steps left to do
    /// ([`pv_fast_finish`](Self::pv_fast_finish)), then the slow path if
    /// the lock is not ours yet. `state` is a [`FastTry`]'s discriminant.
    extern "C" fn lock_cold<const MODE: u8, const LAZY: bool>(this: usize, state: usize) -> usize {
        // SAFETY: `pv_lock_saving` passes `self`, borrowed for the call.
        let this = unsafe { &*(this as *const Self) };
        match this.pv_fast_finish(FastTry::ALL[state]) {
            Ok(()) => 0,
            Err(val) => TOKEN_SLOW_OWNER | this.pv_lock_slow::<MODE, LAZY>(val),
        }
    }

    /// [`unlock_slow_owner`](Self::unlock_slow_owner) through the thunk.
    ///
    /// # Safety
    /// As for `unlock_slow_owner`.
    #[inline(always)]
    pub(super) unsafe fn pv_unlock_saving<const MODE: u8>(&self, token: usize) {
        // SAFETY: `unlock_cold` releases the lock this points to, which
        // the caller holds; it does not unwind.
        unsafe {
            call(
                Self::unlock_cold::<MODE>,
                self as *const Self as usize,
                token,
            );
        }
    }

    extern "C" fn unlock_cold<const MODE: u8>(this: usize, token: usize) -> usize {
        // SAFETY: `pv_unlock_saving` passes `self`, borrowed for the call.
        let this = unsafe { &*(this as *const Self) };
        this.unlock_slow_owner_now::<MODE>(token);
        0
    }
}

#[cfg(test)]
mod tests {
    use super::{call, save_call};

    /// Overwrites every register the C convention lets it clobber (the
    /// general-purpose ones; rax is its result).
    extern "C" fn clobber(a: usize, b: usize) -> usize {
        // SAFETY: writes only registers declared as outputs.
        unsafe {
            core::arch::asm!(
                "mov rcx, -1",
                "mov rdx, -1",
                "mov rsi, -1",
                "mov rdi, -1",
                "mov r8, -1",
                "mov r9, -1",
                "mov r10, -1",
                "mov r11, -1",
                out("rcx") _, out("rdx") _, out("rsi") _, out("rdi") _,
                out("r8") _, out("r9") _, out("r10") _, out("r11") _,
                options(nomem, nostack, preserves_flags),
            );
        }
        a * 1000 + b
    }

    /// The stack pointer at entry, mod 16 (the ABI's 8: aligned before
    /// the call that pushed the return address).
    #[unsafe(naked)]
    extern "C" fn entry_alignment(_: usize, _: usize) -> usize {
        core::arch::naked_asm!("mov rax, rsp", "and rax, 15", "ret")
    }

    #[test]
    fn the_thunk_keeps_every_register_but_rax() {
        let (c, d, si, di, r8, r9, r10, r11, r): (
            usize,
            usize,
            usize,
            usize,
            usize,
            usize,
            usize,
            usize,
            usize,
        );
        // SAFETY: `clobber` is safe to call; every register the block
        // writes is an output.
        unsafe {
            core::arch::asm!(
                "mov rcx, 11",
                "mov rdx, 12",
                "mov r8, 18",
                "mov r9, 19",
                "mov r10, 20",
                "mov r11, 21",
                "call {thunk}",
                thunk = sym save_call,
                inout("rax") clobber as extern "C" fn(usize, usize) -> usize as usize => r,
                inout("rdi") 7usize => di,
                inout("rsi") 5usize => si,
                out("rcx") c, out("rdx") d, out("r8") r8, out("r9") r9,
                out("r10") r10, out("r11") r11,
                clobber_abi("C"),
            );
        }
        assert_eq!(r, 7005, "the function's result");
        assert_eq!(
            [c, d, si, di, r8, r9, r10, r11],
            [11, 12, 5, 7, 18, 19, 20, 21],
            "rcx rdx rsi rdi r8 r9 r10 r11 after the call"
        );
    }

    #[test]
    fn the_callee_gets_an_aligned_stack_and_its_result_back() {
        // SAFETY: both functions are safe to call.
        unsafe {
            assert_eq!(call(entry_alignment, 0, 0), 8);
            assert_eq!(call(clobber, 3, 4), 3004);
        }
    }
}
