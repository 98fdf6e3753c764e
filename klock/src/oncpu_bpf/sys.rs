//! The `bpf(2)` and perf syscalls and the kernel structs they take.

use super::{BpfError, Entry, Insn, ENTRIES, PROG_NAME};
use rustix::io::Errno;
use rustix::ioctl::{opcode, Opcode};
use std::os::fd::{FromRawFd, OwnedFd};

const BPF_MAP_CREATE: i32 = 0;
const BPF_PROG_LOAD: i32 = 5;
pub(super) const BPF_PROG_GET_FD_BY_ID: i32 = 13;
const BPF_OBJ_GET_INFO_BY_FD: i32 = 15;
const BPF_MAP_TYPE_ARRAY: u32 = 2;
const BPF_F_MMAPABLE: u32 = 1 << 10;
const BPF_PROG_TYPE_TRACEPOINT: u32 = 5;
const BPF_PROG_TYPE_TRACING: u32 = 26;
const BPF_TRACE_RAW_TP: u32 = 23;
const BPF_RAW_TRACEPOINT_OPEN: i32 = 17;

/// Which kind of program to load.
pub(super) enum Kind {
    /// `BPF_PROG_TYPE_TRACEPOINT` (perf tracepoint).
    Tracepoint,
    /// `BPF_PROG_TYPE_TRACING` / `BPF_TRACE_RAW_TP` on this BTF type.
    TpBtf(u32),
}
const PERF_TYPE_TRACEPOINT: u32 = 2;
/// Passed through `libc::syscall`'s variadic arguments: an `unsigned
/// long`, as the syscall takes it.
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
/// `_IOW('$', 8, __u32)`.
const PERF_EVENT_IOC_SET_BPF: Opcode = opcode::write::<u32>(b'$', 8);
/// `_IO('$', 0)`.
const PERF_EVENT_IOC_ENABLE: Opcode = opcode::none(b'$', 0);

fn name16() -> [u8; 16] {
    let mut n = [0u8; 16];
    n[..PROG_NAME.len()].copy_from_slice(PROG_NAME.as_bytes());
    n
}

/// `bpf(cmd, attr, size)`; the fd or value it returns.
pub(super) fn bpf<T>(cmd: i32, attr: &mut T) -> std::io::Result<i64> {
    // libc: rustix has no bpf(2) wrapper, so this is the raw syscall.
    // SAFETY: `attr` is a properly sized, zero-padded bpf_attr variant.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut T as *mut libc::c_void,
            core::mem::size_of::<T>() as u32,
        )
    };
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn why(what: &str, e: std::io::Error) -> BpfError {
    let hint = match Errno::from_io_error(&e) {
        Some(Errno::PERM) | Some(Errno::ACCESS) => " (needs CAP_BPF and CAP_PERFMON: run as root)",
        Some(Errno::NOSYS) => " (kernel without the bpf syscall)",
        Some(Errno::INVAL) => " (kernel too old or built without CONFIG_BPF_EVENTS?)",
        _ => "",
    };
    BpfError(format!("bpf oracle: {what} failed: {e}{hint}"))
}

#[repr(C)]
#[derive(Default)]
struct MapCreate {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
}

pub(super) fn map_create() -> Result<OwnedFd, BpfError> {
    let mut a = MapCreate {
        map_type: BPF_MAP_TYPE_ARRAY,
        key_size: 4,
        value_size: core::mem::size_of::<Entry>() as u32,
        max_entries: ENTRIES,
        map_flags: BPF_F_MMAPABLE,
        map_name: name16(),
        ..Default::default()
    };
    let fd = bpf(BPF_MAP_CREATE, &mut a).map_err(|e| why("creating the table map", e))?;
    // SAFETY: a fresh fd we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

pub(super) fn map_mmap(fd: &OwnedFd) -> Result<*mut Entry, BpfError> {
    use rustix::mm::{mmap, MapFlags, ProtFlags};
    let len = ENTRIES as usize * core::mem::size_of::<Entry>();
    // SAFETY: mapping a BPF_F_MMAPABLE array map of `len` bytes at an
    // address of the kernel's choosing.
    let p = unsafe {
        mmap(
            core::ptr::null_mut(),
            len,
            ProtFlags::READ | ProtFlags::WRITE,
            MapFlags::SHARED,
            fd,
            0,
        )
    }
    .map_err(|e| why("mapping the table", e.into()))?;
    Ok(p.cast())
}

#[repr(C)]
#[derive(Default)]
struct ProgLoad {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
    prog_btf_fd: u32,
    func_info_rec_size: u32,
    func_info: u64,
    func_info_cnt: u32,
    line_info_rec_size: u32,
    line_info: u64,
    line_info_cnt: u32,
    attach_btf_id: u32,
    attach_btf_obj_fd: u32,
    pad: u32,
}

pub(super) fn prog_load(insns: &[Insn], kind: Kind) -> Result<OwnedFd, BpfError> {
    // The kernel lets only GPL-compatible programs read `task_struct`
    // through BTF (the tp_btf hook), so the program, klock's
    // own instructions, is declared dual MIT/GPL to the kernel.
    let license = c"Dual MIT/GPL";
    let mut log = vec![0u8; 64 * 1024];
    let (prog_type, expected_attach_type, attach_btf_id) = match kind {
        Kind::Tracepoint => (BPF_PROG_TYPE_TRACEPOINT, 0, 0),
        Kind::TpBtf(id) => (BPF_PROG_TYPE_TRACING, BPF_TRACE_RAW_TP, id),
    };
    let mut a = ProgLoad {
        prog_type,
        expected_attach_type,
        attach_btf_id,
        insn_cnt: insns.len() as u32,
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        prog_name: name16(),
        ..Default::default()
    };
    match bpf(BPF_PROG_LOAD, &mut a) {
        // SAFETY: a fresh fd we own.
        Ok(fd) => Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) }),
        Err(e)
            if matches!(
                Errno::from_io_error(&e),
                Some(Errno::ACCESS) | Some(Errno::INVAL)
            ) =>
        {
            // Again with the verifier's log, for the message.
            a.log_level = 1;
            a.log_size = log.len() as u32;
            a.log_buf = log.as_mut_ptr() as u64;
            let _ = bpf(BPF_PROG_LOAD, &mut a);
            let text = String::from_utf8_lossy(&log);
            // The verifier's complaint is the line before its summary.
            let last = text
                .trim_end_matches('\0')
                .lines()
                .rfind(|l| !l.starts_with("processed ") && !l.trim().is_empty())
                .unwrap_or("")
                .to_string();
            let mut err = why("loading the sched_switch program", e);
            if !last.is_empty() {
                err.0.push_str(&format!("; verifier: {last}"));
            }
            Err(err)
        }
        Err(e) => Err(why("loading the sched_switch program", e)),
    }
}

#[repr(C)]
#[derive(Default)]
struct InfoByFd {
    bpf_fd: u32,
    info_len: u32,
    info: u64,
}

/// The leading fields of `struct bpf_prog_info`.
#[repr(C)]
#[derive(Default)]
pub(super) struct ProgInfo {
    pub prog_type: u32,
    pub id: u32,
    pub tag: [u8; 8],
    pub jited_prog_len: u32,
    pub xlated_prog_len: u32,
    pub jited_prog_insns: u64,
    pub xlated_prog_insns: u64,
    pub load_time: u64,
    pub created_by_uid: u32,
    pub nr_map_ids: u32,
    pub map_ids: u64,
    pub name: [u8; 16],
}

pub(super) fn prog_info(fd: i32) -> std::io::Result<ProgInfo> {
    let mut info = ProgInfo::default();
    let mut a = InfoByFd {
        bpf_fd: fd as u32,
        info_len: core::mem::size_of::<ProgInfo>() as u32,
        info: &mut info as *mut ProgInfo as u64,
    };
    bpf(BPF_OBJ_GET_INFO_BY_FD, &mut a)?;
    Ok(info)
}

pub(super) fn prog_id(fd: i32) -> Result<u32, BpfError> {
    prog_info(fd)
        .map(|i| i.id)
        .map_err(|e| why("reading the program's id", e))
}

#[repr(C)]
#[derive(Default)]
pub(super) struct GetById {
    pub id: u32,
    pub next_id: u32,
    pub open_flags: u32,
}

/// `struct perf_event_attr` (PERF_ATTR_SIZE_VER5, 112 bytes).
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    type_: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
    branch_sample_type: u64,
    sample_regs_user: u64,
    sample_stack_user: u32,
    clockid: i32,
    sample_regs_intr: u64,
    aux_watermark: u32,
    sample_max_stack: u16,
    reserved_2: u16,
}

/// Attach `prog` to tracepoint `id` (for all CPUs) through a perf event
/// opened on the first CPU that is online.
pub(super) fn attach(id: u64, prog: i32) -> Result<OwnedFd, BpfError> {
    // libc: rustix has no sysconf (the C library counts the configured
    // CPUs).
    // SAFETY: sysconf has no preconditions.
    let ncpu = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) }.max(1) as i32;
    let mut last_err = None;
    for cpu in 0..ncpu {
        let mut attr = PerfEventAttr {
            type_: PERF_TYPE_TRACEPOINT,
            size: core::mem::size_of::<PerfEventAttr>() as u32,
            config: id,
            sample_period: 1,
            wakeup_events: 1,
            ..Default::default()
        };
        // libc: rustix has no perf_event_open, so this is the raw syscall.
        // SAFETY: a valid perf_event_attr; pid -1 + cpu: all tasks on it.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                &mut attr as *mut PerfEventAttr,
                -1,
                cpu,
                -1,
                PERF_FLAG_FD_CLOEXEC,
            )
        };
        if fd < 0 {
            // An offline CPU (ENODEV) is skipped; other errors too, but
            // remembered in case no CPU could be attached at all.
            last_err = Some(std::io::Error::last_os_error());
            continue;
        }
        // SAFETY: a fresh fd we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
        use rustix::ioctl::{ioctl, IntegerSetter, NoArg};
        // SAFETY: SET_BPF takes the program's fd as its integer
        // argument; ENABLE takes 0 (this event alone, not its group).
        let r = unsafe {
            ioctl(
                &fd,
                IntegerSetter::<PERF_EVENT_IOC_SET_BPF>::new_usize(prog as usize),
            )
            .and_then(|()| ioctl(&fd, NoArg::<PERF_EVENT_IOC_ENABLE>::new()))
        };
        if let Err(e) = r {
            return Err(why("attaching the program to sched_switch", e.into()));
        }
        // One event is enough: a program attached to a tracepoint
        // through a perf event runs on every CPU's hits (the kernel
        // keeps it on the tracepoint, and refuses the same program
        // twice with EEXIST).
        return Ok(fd);
    }
    Err(why(
        "opening the sched_switch perf event",
        last_err.unwrap_or_else(|| Errno::NODEV.into()),
    ))
}

#[repr(C)]
#[derive(Default)]
struct RawTpOpen {
    name: u64,
    prog_fd: u32,
    pad: u32,
}

/// Attach a `tp_btf` program; dropping the link detaches it.
pub(super) fn raw_tracepoint_open(prog: i32) -> Result<OwnedFd, BpfError> {
    let mut a = RawTpOpen {
        prog_fd: prog as u32,
        ..Default::default()
    };
    let fd = bpf(BPF_RAW_TRACEPOINT_OPEN, &mut a)
        .map_err(|e| why("attaching the tp_btf program to sched_switch", e))?;
    // SAFETY: a fresh fd we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

pub(super) fn mount_tracefs(at: &str) -> Result<(), BpfError> {
    use rustix::mount::{mount, MountFlags};
    mount("nodev", at, "tracefs", MountFlags::empty(), None).map_err(|e| {
        why(
            &format!("tracefs is not mounted and mounting it on {at}"),
            e.into(),
        )
    })
}
