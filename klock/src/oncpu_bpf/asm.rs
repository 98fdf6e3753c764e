//! The program: the instruction encoder (`struct bpf_insn`, opcodes,
//! registers) and the `sched_switch` program assembled with it.

use super::MASK;

/// One eBPF instruction (`struct bpf_insn`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Insn {
    code: u8,
    regs: u8, // dst in the low nibble, src in the high nibble
    off: i16,
    imm: i32,
}

// `struct bpf_insn` is 8 bytes with no padding: `program_bytes` relies on it.
const _: () = assert!(core::mem::size_of::<Insn>() == 8);

/// The instructions as the bytes `BPF_PROG_LOAD` hands the kernel: each
/// `struct bpf_insn` in memory order (opcode, the register byte with dst
/// in the low nibble as on a little-endian machine, then `off` and `imm`
/// little-endian). Lets a test decode the very bytes the kernel gets with
/// a decoder of its own, without loading anything.
pub fn program_bytes(insns: &[Insn]) -> &[u8] {
    // SAFETY: `Insn` is repr(C), 8 bytes, no padding (asserted above), and
    // the slice stays borrowed for the result's lifetime.
    unsafe { core::slice::from_raw_parts(insns.as_ptr().cast(), core::mem::size_of_val(insns)) }
}

const fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        regs: dst | (src << 4),
        off,
        imm,
    }
}

// Opcodes: class | op | source.
const MOV64_X: u8 = 0x07 | 0xb0 | 0x08;
const MOV64_K: u8 = 0x07 | 0xb0;
const ADD64_K: u8 = 0x07;
const AND64_K: u8 = 0x07 | 0x50;
const ADD32_K: u8 = 0x04;
const AND32_K: u8 = 0x04 | 0x50;
const OR32_K: u8 = 0x04 | 0x40;
const LDXW: u8 = 0x01 | 0x60; // ldx, mem, 32-bit
const LDXDW: u8 = 0x01 | 0x60 | 0x18; // ldx, mem, 64-bit
const STXW: u8 = 0x03 | 0x60; // stx, mem, 32-bit
const LD_IMM64: u8 = 0x18;
const JEQ_K: u8 = 0x05 | 0x10;
const JNE_X: u8 = 0x05 | 0x50 | 0x08;
const CALL: u8 = 0x05 | 0x80;
const EXIT: u8 = 0x05 | 0x90;
const PSEUDO_MAP_FD: u8 = 1;
const HELPER_MAP_LOOKUP_ELEM: i32 = 1;
const R0: u8 = 0;
const R1: u8 = 1;
const R2: u8 = 2;
const R6: u8 = 6;
const R7: u8 = 7;
/// The frame pointer.
const R10: u8 = 10;

/// Where the program finds the two tids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TidSource {
    /// A `tp_btf` program: the context holds the tracepoint's arguments
    /// (`preempt`, `prev`, `next`, …) and `task_struct.pid` is at this
    /// byte offset (from the kernel's BTF).
    TaskPid(i16),
    /// A perf tracepoint program: the context is the `sched_switch`
    /// record, with `prev_pid` and `next_pid` at these offsets (tracefs).
    Record {
        /// Byte offset of `prev_pid` in the record.
        prev: i16,
        /// Byte offset of `next_pid` in the record.
        next: i16,
    },
}

/// The program: for `prev` then `next`, find the entry, check its tag,
/// apply the transition (module docs). Returns 0.
pub fn program(map_fd: i32, src: TidSource) -> Vec<Insn> {
    let mut p = vec![insn(MOV64_X, R6, R1, 0, 0)]; // r6 = ctx
    for next in [false, true] {
        // r7 = the tid.
        match src {
            TidSource::TaskPid(pid) => {
                let arg = if next { 16 } else { 8 }; // args[2] / args[1]
                p.push(insn(LDXDW, R7, R6, arg, 0)); // r7 = task pointer
                p.push(insn(LDXW, R7, R7, pid, 0)); // r7 = task->pid
            }
            TidSource::Record { prev, next: nxt } => {
                p.push(insn(LDXW, R7, R6, if next { nxt } else { prev }, 0));
            }
        }
        let transition = if next {
            // state = (state | 1) + 2
            [insn(OR32_K, R1, 0, 0, 1), insn(ADD32_K, R1, 0, 0, 2)]
        } else {
            // state = (state + 1) & !1
            [insn(ADD32_K, R1, 0, 0, 1), insn(AND32_K, R1, 0, 0, -2)]
        };
        // Jump offsets count instructions after the jump, to the block end.
        let block = [
            insn(JEQ_K, R7, 0, 15, 0),            // idle task: skip
            insn(MOV64_X, R1, R7, 0, 0),          //
            insn(AND64_K, R1, 0, 0, MASK as i32), // key = tid & MASK
            insn(STXW, R10, R1, -4, 0),           // *(fp - 4) = key
            insn(LD_IMM64, R1, PSEUDO_MAP_FD, 0, map_fd),
            insn(0, 0, 0, 0, 0),
            insn(MOV64_X, R2, R10, 0, 0),
            insn(ADD64_K, R2, 0, 0, -4),
            insn(CALL, 0, 0, 0, HELPER_MAP_LOOKUP_ELEM), // r0 = &entry or null
            insn(JEQ_K, R0, 0, 6, 0),                    // null: skip
            insn(LDXW, R1, R0, 0, 0),                    // r1 = entry.tid
            insn(JNE_X, R1, R7, 4, 0),                   // not ours: skip
            insn(LDXW, R1, R0, 4, 0),                    // r1 = entry.state
            transition[0],
            transition[1],
            insn(STXW, R0, R1, 4, 0), // entry.state = r1
        ];
        p.extend_from_slice(&block);
    }
    p.push(insn(MOV64_K, R0, 0, 0, 0));
    p.push(insn(EXIT, 0, 0, 0, 0));
    p
}
