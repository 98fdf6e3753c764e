//! Function names for the profile's sites at a normal exit, from the
//! objects' own symbol tables.
//!
//! A site is looked up with `dladdr` when its lock's row is claimed, and
//! `dladdr` knows only the dynamic symbols: the functions a program
//! exports, which for an executable built without `-rdynamic` is none, so
//! its sites read `program+0x1338`. The symbol table (`.symtab`) of an
//! executable that is not stripped names every function. Reading it takes
//! the file and the allocator, which a report in a signal handler may not
//! use, so only the report at a normal exit does it; a stripped object,
//! or one that cannot be read, keeps `dladdr`'s answer.
//!
//! A stripped object's functions are found in its separate debug file,
//! where the distribution installs one (`apt install memcached-dbgsym`):
//! `/usr/lib/debug/.build-id/xx/yyyy.debug`, named by the object's build
//! id (`KLOCK_STAT_DEBUG_DIR` names another directory than
//! `/usr/lib/debug`); or, for an object without one there, the file its
//! `.gnu_debuglink` section names (as `objcopy --add-gnu-debuglink`
//! writes it), looked for where the GNU tools look and taken only if its
//! CRC-32 is the one the link records.
//!
//! The same report writes C++ names as the program's source does
//! (`server::Cache::lookup`, without the parameters) instead of as the
//! compiler mangled them (`_ZN6server5Cache6lookupERKSs`), whichever of
//! the two tables named the function. Demangling allocates too: the
//! report in a signal handler keeps the mangled names.

use super::Site;
use object::read::elf::{ElfFile64, FileHeader, ProgramHeader};
use object::{elf, Endianness, Object, ObjectSymbol, ReadCache, SymbolKind};
use std::collections::HashMap;

/// One object's functions: start and size (ELF addresses), name, sorted
/// by start; and what to subtract from a run-time address to get an ELF
/// address.
struct Functions {
    bias: u64,
    list: Vec<(u64, u64, String)>,
}

/// The symbol tables read so far, by the object's load address
/// (`dli_fbase`); `None` for an object with none to use.
#[derive(Default)]
pub(super) struct Symbols {
    objects: HashMap<usize, Option<Functions>>,
}

impl Symbols {
    /// `function+0xoff` for `site`, where `dladdr` found the object but
    /// no symbol and the object's symbol table names the function, or
    /// where the name `dladdr` found is a mangled C++ name. `None`: the
    /// site is best described from `dladdr`'s answer as it is.
    pub(super) fn function(&mut self, site: &Site) -> Option<String> {
        if site.ip == 0 || site.fname == 0 {
            return None;
        }
        if site.sname != 0 {
            // SAFETY: dladdr's strings are NUL-terminated and live while
            // the object is loaded.
            let name = unsafe { core::ffi::CStr::from_ptr(site.sname as *const libc::c_char) };
            let name = demangle(name.to_str().ok()?)?;
            return Some(format!("{name}+{:#x}", site.ip - site.saddr));
        }
        let funcs = self
            .objects
            .entry(site.fbase)
            .or_insert_with(|| load(site.fname, site.fbase))
            .as_ref()?;
        // The return address follows the call, which is in the function:
        // look up the byte before it (a call that ends a function, to one
        // that does not return, has its return address past the end).
        let at = (site.ip as u64).wrapping_sub(funcs.bias);
        let before = at.checked_sub(1)?;
        let i = funcs.list.partition_point(|f| f.0 <= before);
        let (start, size, name) = &funcs.list[i.checked_sub(1)?];
        if before >= start + size {
            return None;
        }
        let name = demangle(name).unwrap_or_else(|| name.clone());
        Some(format!("{name}+{:#x}", at - start))
    }
}

/// A mangled C++ (Itanium ABI) function name as written in the source,
/// without its parameters and return type; `None` for a name that is not
/// one (a C function's, which could otherwise read as a mangled type).
fn demangle(name: &str) -> Option<String> {
    if !name.starts_with("_Z") {
        return None;
    }
    let symbol = cpp_demangle::Symbol::new(name.as_bytes()).ok()?;
    let options = cpp_demangle::DemangleOptions::new()
        .no_params()
        .no_return_type();
    symbol.demangle_with_options(&options).ok()
}

/// The functions of the object whose path `dladdr` gave as `fname` (a C
/// string), loaded at `fbase`. The main program's path is as it was
/// started (`./server`, or a bare name found through `PATH`), which need
/// not lead to it from the current directory: a path that is not
/// absolute is read as `/proc/self/exe`, the main program (the dynamic
/// linker names the libraries it loads by absolute paths).
fn load(fname: usize, fbase: usize) -> Option<Functions> {
    use std::os::unix::ffi::OsStrExt;
    // SAFETY: dladdr's strings are NUL-terminated and live while the
    // object is loaded.
    let name = unsafe { core::ffi::CStr::from_ptr(fname as *const libc::c_char) };
    let name = std::ffi::OsStr::from_bytes(name.to_bytes());
    let main = !name.as_bytes().starts_with(b"/");
    let path = if main {
        std::path::Path::new("/proc/self/exe")
    } else {
        std::path::Path::new(name)
    };
    let data = ReadCache::new(std::fs::File::open(path).ok()?);
    let file = ElfFile64::<Endianness, _>::parse(&data).ok()?;
    // `dli_fbase` is where the object's first loadable segment was
    // mapped, rounded down to a page: the lowest segment address, rounded
    // the same way, is what it stands for in the file's addresses.
    let header = file.elf_header();
    let endian = file.endian();
    let phdrs = header.program_headers(endian, &data).ok()?;
    let lowest = phdrs
        .iter()
        .filter(|ph| ph.p_type(endian) == elf::PT_LOAD)
        .map(|ph| ph.p_vaddr(endian))
        .min()?;
    let page = rustix::param::page_size() as u64;
    let bias = (fbase as u64).wrapping_sub(lowest & !(page - 1));
    if main {
        // Only if that object is the main program, whose program headers
        // the kernel says where it mapped (`AT_PHDR`): another object with
        // a path that is not absolute gets no names rather than wrong ones.
        let phdr = phdrs.iter().find(|ph| ph.p_type(endian) == elf::PT_PHDR)?;
        // SAFETY: getauxval reads the process's auxiliary vector.
        let at_phdr = unsafe { libc::getauxval(libc::AT_PHDR) };
        if at_phdr.wrapping_sub(phdr.p_vaddr(endian)) != bias {
            return None;
        }
    }
    let mut list = functions(&file);
    if list.is_empty() {
        // Stripped: its separate debug file, if one is installed, has the
        // symbol table, at the same addresses.
        let real = if main {
            std::fs::read_link(path).ok()?
        } else {
            path.to_path_buf()
        };
        list = separate_functions(&file, &real).unwrap_or_default();
    }
    if list.is_empty() {
        return None;
    }
    list.sort_unstable_by_key(|f| f.0);
    Some(Functions { bias, list })
}

/// The functions an ELF file's symbol table names: start, size, name.
fn functions<'data, R: object::ReadRef<'data>>(
    file: &ElfFile64<'data, Endianness, R>,
) -> Vec<(u64, u64, String)> {
    file.symbols()
        .filter(|s| s.kind() == SymbolKind::Text && s.size() > 0)
        .filter_map(|s| Some((s.address(), s.size(), s.name().ok()?.to_string())))
        .collect()
}

/// The functions of a stripped object's separate debug file: the one its
/// build id names ([`debug_file`]), else the one its `.gnu_debuglink`
/// names ([`debuglink_paths`]) whose CRC-32 is the one the link records.
fn separate_functions<'data, R: object::ReadRef<'data>>(
    file: &ElfFile64<'data, Endianness, R>,
    path: &std::path::Path,
) -> Option<Vec<(u64, u64, String)>> {
    if let Some(id) = file.build_id().ok().flatten() {
        let found = debug_file(id).and_then(|p| {
            let data = ReadCache::new(std::fs::File::open(p).ok()?);
            let debug = ElfFile64::<Endianness, _>::parse(&data).ok()?;
            (debug.build_id().ok()? == Some(id)).then(|| functions(&debug))
        });
        if found.is_some() {
            return found;
        }
    }
    let (name, crc) = file.gnu_debuglink().ok()??;
    debuglink_paths(path, name).into_iter().find_map(|p| {
        let bytes = std::fs::read(p).ok()?;
        if crc32fast::hash(&bytes) != crc {
            return None;
        }
        let debug = ElfFile64::<Endianness, _>::parse(&*bytes).ok()?;
        Some(functions(&debug))
    })
}

/// Where a debug file named `name` by the `.gnu_debuglink` of the object
/// at `path` may be, in the order the GNU tools look: beside the object,
/// in `.debug/` beside it, and under the debug directory
/// (`KLOCK_STAT_DEBUG_DIR` or `/usr/lib/debug`) at the object's directory
/// (`/usr/lib/debug/usr/bin/NAME` for `/usr/bin/server`).
fn debuglink_paths(path: &std::path::Path, name: &[u8]) -> Vec<std::path::PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let name = std::ffi::OsStr::from_bytes(name);
    // A bare file name only: the link must not lead elsewhere.
    if name.is_empty() || name.as_bytes().contains(&b'/') {
        return Vec::new();
    }
    let Some(dir) = path.parent() else {
        return Vec::new();
    };
    let global =
        std::env::var_os("KLOCK_STAT_DEBUG_DIR").unwrap_or_else(|| "/usr/lib/debug".into());
    let under = std::path::Path::new(&global).join(dir.strip_prefix("/").unwrap_or(dir));
    vec![
        dir.join(name),
        dir.join(".debug").join(name),
        under.join(name),
    ]
}

/// Where the separate debug file of the object with build id `id` is
/// installed: `DIR/.build-id/xx/yyyy.debug`, DIR `KLOCK_STAT_DEBUG_DIR`
/// or `/usr/lib/debug`, xx the id's first byte and yyyy the rest, in hex.
fn debug_file(id: &[u8]) -> Option<std::path::PathBuf> {
    use std::fmt::Write;
    let (first, rest) = id.split_first()?;
    let mut name = String::new();
    for b in rest {
        let _ = write!(name, "{b:02x}");
    }
    let dir = std::env::var_os("KLOCK_STAT_DEBUG_DIR").unwrap_or_else(|| "/usr/lib/debug".into());
    Some(
        std::path::Path::new(&dir)
            .join(".build-id")
            .join(format!("{first:02x}"))
            .join(name + ".debug"),
    )
}
