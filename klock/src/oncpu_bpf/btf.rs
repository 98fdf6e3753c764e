//! The kernel's BTF: `task_struct.pid` and the `tp_btf` target.

/// What a `tp_btf` program on `sched_switch` needs from vmlinux BTF.
#[derive(Debug, Clone)]
pub(super) struct Target {
    /// Type id of the `btf_trace_sched_switch` typedef.
    pub attach_btf_id: u32,
    /// Byte offset of `pid` in `struct task_struct`.
    pub pid_off: u32,
}

const PATH: &str = "/sys/kernel/btf/vmlinux";
const KIND_INT: u32 = 1;
const KIND_ARRAY: u32 = 3;
const KIND_STRUCT: u32 = 4;
const KIND_UNION: u32 = 5;
const KIND_ENUM: u32 = 6;
const KIND_TYPEDEF: u32 = 8;
const KIND_FUNC_PROTO: u32 = 13;
const KIND_VAR: u32 = 14;
const KIND_DATASEC: u32 = 15;
const KIND_DECL_TAG: u32 = 17;
const KIND_ENUM64: u32 = 19;

struct Ty {
    name: u32,
    kind: u32,
    kind_flag: bool,
    /// Members of a struct/union: (name, type, bit offset).
    members: Vec<(u32, u32, u32)>,
}

fn u32_at(d: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(d.get(at..at + 4)?.try_into().ok()?))
}

/// Parse `/sys/kernel/btf/vmlinux` (raw BTF, little endian) far
/// enough to find the two facts.
pub(super) fn find() -> Result<Target, String> {
    let d = std::fs::read(PATH).map_err(|e| format!("{PATH}: {e}"))?;
    let bad = || format!("{PATH}: not BTF this code can read");
    if d.len() < 24 || d[0..2] != [0x9f, 0xeb] {
        return Err(bad());
    }
    let hdr = u32_at(&d, 4).ok_or_else(bad)? as usize;
    let (toff, tlen) = (
        u32_at(&d, 8).ok_or_else(bad)?,
        u32_at(&d, 12).ok_or_else(bad)?,
    );
    let soff = u32_at(&d, 16).ok_or_else(bad)? as usize;
    let types = d
        .get(hdr + toff as usize..hdr + (toff + tlen) as usize)
        .ok_or_else(bad)?;
    let strings = d.get(hdr + soff..).ok_or_else(bad)?;
    let name = |off: u32| -> &[u8] {
        let s = strings.get(off as usize..).unwrap_or(&[]);
        &s[..s.iter().position(|&b| b == 0).unwrap_or(s.len())]
    };
    // Type ids start at 1.
    let mut all: Vec<Ty> = vec![Ty {
        name: 0,
        kind: 0,
        kind_flag: false,
        members: Vec::new(),
    }];
    let mut at = 0usize;
    while at + 12 <= types.len() {
        let info = u32_at(types, at + 4).ok_or_else(bad)?;
        let (vlen, kind) = ((info & 0xffff) as usize, (info >> 24) & 0x1f);
        let mut ty = Ty {
            name: u32_at(types, at).ok_or_else(bad)?,
            kind,
            kind_flag: info >> 31 == 1,
            members: Vec::new(),
        };
        at += 12;
        let extra = match kind {
            KIND_INT | KIND_VAR | KIND_DECL_TAG => 4,
            KIND_ARRAY => 12,
            KIND_STRUCT | KIND_UNION => {
                for m in 0..vlen {
                    let b = at + 12 * m;
                    ty.members.push((
                        u32_at(types, b).ok_or_else(bad)?,
                        u32_at(types, b + 4).ok_or_else(bad)?,
                        u32_at(types, b + 8).ok_or_else(bad)?,
                    ));
                }
                12 * vlen
            }
            KIND_ENUM | KIND_FUNC_PROTO => 8 * vlen,
            KIND_DATASEC | KIND_ENUM64 => 12 * vlen,
            _ => 0,
        };
        at += extra;
        all.push(ty);
    }
    let attach_btf_id = all
        .iter()
        .position(|t| t.kind == KIND_TYPEDEF && name(t.name) == b"btf_trace_sched_switch")
        .ok_or("no btf_trace_sched_switch in the kernel's BTF")? as u32;
    let task = all
        .iter()
        .position(|t| t.kind == KIND_STRUCT && name(t.name) == b"task_struct")
        .ok_or("no struct task_struct in the kernel's BTF")?;
    // `pid` may sit in an anonymous struct/union member (randomized
    // layouts): search those too, adding their offsets.
    fn pid_bits(all: &[Ty], id: usize, name: &dyn Fn(u32) -> bool, depth: u32) -> Option<u32> {
        let t = all.get(id)?;
        for &(n, ty, off) in &t.members {
            let bits = if t.kind_flag { off & 0xff_ffff } else { off };
            if name(n) {
                return Some(bits);
            }
            let inner = all.get(ty as usize)?;
            if n == 0 && depth < 4 && (inner.kind == KIND_STRUCT || inner.kind == KIND_UNION) {
                if let Some(b) = pid_bits(all, ty as usize, name, depth + 1) {
                    return Some(bits + b);
                }
            }
        }
        None
    }
    let is_pid = |n: u32| name(n) == b"pid";
    let bits = pid_bits(&all, task, &is_pid, 0).ok_or("no task_struct.pid in the kernel's BTF")?;
    if bits % 8 != 0 {
        return Err("task_struct.pid is not byte aligned".into());
    }
    Ok(Target {
        attach_btf_id,
        pid_off: bits / 8,
    })
}
