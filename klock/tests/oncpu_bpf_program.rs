#![cfg(all(feature = "bpf", not(loom)))]
//! The hand-assembled `sched_switch` program (`klock::oncpu_bpf::program`)
//! checked by an eBPF implementation that is not the kernel's: the rbpf
//! crate decodes the exact bytes `BPF_PROG_LOAD` is given, and the listing
//! must match the one written out here instruction by instruction
//! (mnemonic, registers, offsets, immediates), so a mis-encoded register
//! nibble, offset or opcode fails. rbpf's verifier then accepts it, and its
//! interpreter runs it on fake contexts with a stand-in for the map lookup
//! helper, checking the state transitions of the module docs.
//!
//! Nothing here loads a program or needs privileges: it runs as any user.

use klock::oncpu_bpf::{self, Entry, TidSource, ENTRIES, MASK};
use rbpf::disassembler::{to_insn_vec, HLInsn};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering::Relaxed};
use std::sync::Mutex;

/// The map fd the tests assemble into the program (any number will do:
/// nothing is loaded).
const MAP_FD: i32 = 42;
/// A `task_struct.pid` offset as BTF might report it.
const PID_OFF: i16 = 0x5c8;
/// `prev_pid` / `next_pid` in the `sched_switch` record, as tracefs reports
/// them on current kernels.
const PREV_OFF: i16 = 24;
const NEXT_OFF: i16 = 56;

fn bytes(src: TidSource) -> Vec<u8> {
    oncpu_bpf::program_bytes(&oncpu_bpf::program(MAP_FD, src)).to_vec()
}

/// One block, for `prev` (`next == false`) or `next`: find the entry, check
/// its tag, apply the transition. `load` is how the tid gets into r7.
fn block(load: &[&str], next: bool) -> Vec<String> {
    let mut l: Vec<String> = load.iter().map(|s| s.to_string()).collect();
    l.extend(
        [
            "jeq r7, 0x0, +0xf", // idle task (tid 0): to the block's end
            "mov64 r1, r7",
            "and64 r1, 0xffff", // key = tid & MASK
            "stxw [r10-0x4], r1",
            "lddw r1, 0x2a", // the map (src: pseudo map fd, checked below)
            "mov64 r2, r10",
            "add64 r2, 0xfffffffc", // r2 = fp - 4, the key's address
            "call 0x1",             // bpf_map_lookup_elem
            "jeq r0, 0x0, +0x6",    // null: to the block's end
            "ldxw r1, [r0+0x0]",    // entry.tid
            "jne r1, r7, +0x4",     // not ours: to the block's end
            "ldxw r1, [r0+0x4]",    // entry.state
        ]
        .map(String::from),
    );
    if next {
        l.push("or32 r1, 0x1".into()); // (state | 1) + 2
        l.push("add32 r1, 0x2".into());
    } else {
        l.push("add32 r1, 0x1".into()); // (state + 1) & !1
        l.push("and32 r1, 0xfffffffe".into());
    }
    l.push("stxw [r0+0x4], r1".into());
    l
}

fn listing(prev_load: &[&str], next_load: &[&str]) -> Vec<String> {
    let mut l = vec!["mov64 r6, r1".to_string()]; // r6 = ctx
    l.extend(block(prev_load, false));
    l.extend(block(next_load, true));
    l.push("mov64 r0, 0x0".into());
    l.push("exit".into());
    l
}

/// rbpf's text shows the fields an instruction uses; the kernel demands
/// that the others be zero. Checked here so that a stray bit in a field the
/// text does not show fails too. `raw` is the whole program (for the second
/// half of `lddw`).
fn unshown_fields_are_zero(h: &HLInsn, at: usize, raw: &[u8]) {
    let class = h.opc & 0x07;
    let reg_form = h.opc & 0x08 != 0;
    let what = format!("insn #{at} ({})", h.desc);
    match (class, h.opc) {
        // lddw: off unused; src 1 says "imm is a map fd"; the second slot
        // carries only the upper imm.
        (0, 0x18) => {
            assert_eq!((h.src, h.off), (1, 0), "{what}: src/off");
            assert_eq!(
                raw[8 * (at + 1)..8 * (at + 1) + 4],
                [0; 4],
                "{what}: 2nd slot"
            );
        }
        // ldx / stx: imm unused.
        (1, _) | (3, _) => assert_eq!(h.imm, 0, "{what}: imm"),
        // ALU / ALU64: off unused; src unused with an immediate, imm with a
        // register.
        (4, _) | (7, _) => {
            assert_eq!(h.off, 0, "{what}: off");
            if reg_form {
                assert_eq!(h.imm, 0, "{what}: imm");
            } else {
                assert_eq!(h.src, 0, "{what}: src");
            }
        }
        // call (helper): only imm.
        (5, 0x85) => assert_eq!((h.dst, h.src, h.off), (0, 0, 0), "{what}"),
        // exit: nothing.
        (5, 0x95) => assert_eq!((h.dst, h.src, h.off, h.imm), (0, 0, 0, 0), "{what}"),
        // conditional jumps.
        (5, _) => {
            if reg_form {
                assert_eq!(h.imm, 0, "{what}: imm");
            } else {
                assert_eq!(h.src, 0, "{what}: src");
            }
        }
        _ => panic!("{what}: an instruction class the program does not use"),
    }
}

/// Decode `raw` with rbpf, compare with `want` and check the unshown fields.
fn check_listing(raw: &[u8], want: &[String]) {
    let got = to_insn_vec(raw);
    let text: Vec<&str> = got.iter().map(|h| h.desc.as_str()).collect();
    assert_eq!(
        text,
        want,
        "the assembled program decodes differently:\n{}",
        text.join("\n")
    );
    // Walk the raw slots alongside (lddw takes two).
    let mut slot = 0;
    for h in &got {
        unshown_fields_are_zero(h, slot, raw);
        slot += if h.opc == 0x18 { 2 } else { 1 };
    }
    assert_eq!(slot * 8, raw.len());
}

#[test]
fn tp_btf_program_decodes_as_written() {
    let raw = bytes(TidSource::TaskPid(PID_OFF));
    let want = listing(
        &["ldxdw r7, [r6+0x8]", "ldxw r7, [r7+0x5c8]"], // args[1] = prev; ->pid
        &["ldxdw r7, [r6+0x10]", "ldxw r7, [r7+0x5c8]"], // args[2] = next; ->pid
    );
    assert_eq!(raw.len(), 8 * 39, "39 instruction slots (lddw takes two)");
    check_listing(&raw, &want);
}

#[test]
fn tracepoint_program_decodes_as_written() {
    let raw = bytes(TidSource::Record {
        prev: PREV_OFF,
        next: NEXT_OFF,
    });
    let want = listing(&["ldxw r7, [r6+0x18]"], &["ldxw r7, [r6+0x38]"]);
    assert_eq!(raw.len(), 8 * 37, "37 instruction slots (lddw takes two)");
    check_listing(&raw, &want);
}

#[test]
fn every_jump_lands_on_the_end_of_its_block() {
    // The listing checks the offsets' values; this checks what they mean:
    // each skip lands on the first instruction after its block's final
    // store (the next block, or the closing `mov64 r0, 0`).
    for src in [
        TidSource::TaskPid(PID_OFF),
        TidSource::Record {
            prev: PREV_OFF,
            next: NEXT_OFF,
        },
    ] {
        let raw = bytes(src);
        let at = |i: usize| raw[8 * i];
        let slots = raw.len() / 8;
        let block_ends: Vec<usize> = (0..slots)
            .filter(|&i| at(i) == 0x63 && raw[8 * i + 1] == 0x10) // stxw [r0+..], r1
            .map(|i| i + 1)
            .collect();
        assert_eq!(block_ends.len(), 2, "{src:?}: two blocks");
        let mut jumps = 0;
        for i in 0..slots {
            if matches!(at(i), 0x15 | 0x5d) {
                // jeq imm / jne reg
                let off = i16::from_le_bytes([raw[8 * i + 2], raw[8 * i + 3]]);
                let target = (i as isize + 1 + off as isize) as usize;
                let end = *block_ends.iter().find(|&&e| e > i).unwrap();
                assert_eq!(target, end, "{src:?}: jump at slot {i}");
                jumps += 1;
            }
        }
        assert_eq!(jumps, 6, "{src:?}: three skips per block");
    }
}

#[test]
fn rbpf_verifier_accepts_both_programs() {
    for src in [
        TidSource::TaskPid(PID_OFF),
        TidSource::Record {
            prev: PREV_OFF,
            next: NEXT_OFF,
        },
    ] {
        let raw = bytes(src);
        // Loading a program into an rbpf VM runs rbpf's verifier: known
        // opcodes, valid registers (r10 only as a base), complete lddw,
        // jumps inside the program, a final exit.
        let verdict = rbpf::EbpfVmRaw::new(Some(&raw)).map(drop);
        if let Err(e) = verdict {
            panic!("{src:?}: {e}");
        }
    }
}

// ---- running it: rbpf's interpreter with a stand-in map ---------------------

/// The stand-in for the BPF array map: as many entries as the real one.
static TABLE: [Entry; ENTRIES as usize] = [const {
    Entry {
        tid: AtomicU32::new(0),
        state: AtomicU32::new(0),
    }
}; ENTRIES as usize];
/// Calls of the lookup helper in the current run.
static LOOKUPS: AtomicUsize = AtomicUsize::new(0);
/// The interpreter's helper and TABLE are process-wide: one run at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// `bpf_map_lookup_elem(map, &key)` on TABLE: the entry's address, or null
/// for another map or a key out of range (as the kernel's array map does).
fn map_lookup_elem(map: u64, key: u64, _: u64, _: u64, _: u64) -> u64 {
    LOOKUPS.fetch_add(1, Relaxed);
    // The interpreter hands over the address of the key on its own stack.
    // SAFETY: r2 = fp - 4, where the program stored the 4-byte key.
    let key = unsafe { (key as *const u32).read_unaligned() };
    if map != MAP_FD as u64 || key >= ENTRIES {
        return 0;
    }
    &TABLE[key as usize] as *const Entry as u64
}

fn set(tid: u32, tag: u32, state: u32) {
    let e = &TABLE[(tid & MASK) as usize];
    e.tid.store(tag, Relaxed);
    e.state.store(state, Relaxed);
}

fn state(tid: u32) -> u32 {
    TABLE[(tid & MASK) as usize].state.load(Relaxed)
}

/// Run the program once on `ctx` (the interpreter's r1 points at it).
fn run(raw: &[u8], ctx: &mut [u8]) {
    LOOKUPS.store(0, Relaxed);
    let mut vm = rbpf::EbpfVmRaw::new(Some(raw)).expect("rbpf accepts the program");
    vm.register_helper(1, map_lookup_elem).unwrap();
    let start = TABLE.as_ptr() as u64;
    vm.register_allowed_memory(start..start + core::mem::size_of_val(&TABLE) as u64);
    assert_eq!(vm.execute_program(ctx).expect("the program runs"), 0);
}

/// A perf tracepoint context: the `sched_switch` record with the two pids.
fn record(prev: u32, next: u32) -> Vec<u8> {
    let mut r = vec![0u8; 64];
    r[PREV_OFF as usize..][..4].copy_from_slice(&prev.to_le_bytes());
    r[NEXT_OFF as usize..][..4].copy_from_slice(&next.to_le_bytes());
    r
}

/// A `tp_btf` context: `args[0..3]` = (preempt, prev, next), the two task
/// pointers aimed at fake tasks in the same buffer, each with its pid at
/// `PID_OFF`. The buffer's address is only known once it exists, so the
/// pointers are written into it after allocation.
fn task_args(prev: u32, next: u32) -> Vec<u8> {
    let task = PID_OFF as usize + 4;
    let mut c = vec![0u8; 24 + 2 * task];
    for (i, pid) in [prev, next].into_iter().enumerate() {
        let at = 24 + i * task;
        c[at + PID_OFF as usize..][..4].copy_from_slice(&pid.to_le_bytes());
        let p = c.as_ptr() as u64 + at as u64;
        c[8 + 8 * i..][..8].copy_from_slice(&p.to_le_bytes());
    }
    c
}

#[test]
fn interpreted_switches_follow_the_state_machine() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    type Ctx = fn(u32, u32) -> Vec<u8>;
    let cases: [(TidSource, Ctx); 2] = [
        (TidSource::TaskPid(PID_OFF), task_args),
        (
            TidSource::Record {
                prev: PREV_OFF,
                next: NEXT_OFF,
            },
            record,
        ),
    ];
    for (src, ctx) in cases {
        let raw = bytes(src);
        // Tids above MASK share entries with small ones: the key is masked,
        // the tag compared in full.
        let (a, b, c) = (0x1_0007u32, 0x2_0009u32, 0x3_0007u32);

        // prev on CPU (odd) goes off (even); next off goes on (odd, +2).
        set(a, a, 5);
        set(b, b, 8);
        run(&raw, &mut ctx(a, b));
        assert_eq!((state(a), state(b)), (6, 11), "{src:?}: a out, b in");
        assert_eq!(LOOKUPS.load(Relaxed), 2);

        // And back: b out (11 -> 12), a in (6 -> 9).
        run(&raw, &mut ctx(b, a));
        assert_eq!((state(a), state(b)), (9, 12), "{src:?}: b out, a in");

        // Unknown (0) stays unknown on a switch-out; any state goes odd on
        // a switch-in.
        set(a, a, 0);
        set(b, b, 0);
        run(&raw, &mut ctx(a, b));
        assert_eq!((state(a), state(b)), (0, 3), "{src:?}: from unknown");

        // An entry tagged with another tid (a collision: c shares a's
        // entry) is left alone.
        set(a, a, 9);
        run(&raw, &mut ctx(c, b));
        assert_eq!(state(c), 9, "{src:?}: another thread's entry");

        // The idle task (tid 0) is skipped before any lookup.
        set(b, b, 4);
        run(&raw, &mut ctx(0, 0));
        assert_eq!(LOOKUPS.load(Relaxed), 0, "{src:?}: idle looked up");
        run(&raw, &mut ctx(0, b));
        assert_eq!(
            (LOOKUPS.load(Relaxed), state(b)),
            (1, 7),
            "{src:?}: idle -> b"
        );

        // A failed lookup (null) is skipped: a program built for another
        // map gets null from the stand-in and must not touch anything.
        let other = oncpu_bpf::program_bytes(&oncpu_bpf::program(MAP_FD + 1, src)).to_vec();
        set(a, a, 5);
        run(&other, &mut ctx(a, b));
        assert_eq!((state(a), state(b)), (5, 7), "{src:?}: null lookup");
        assert_eq!(LOOKUPS.load(Relaxed), 2);

        set(a, 0, 0);
        set(b, 0, 0);
    }
}
