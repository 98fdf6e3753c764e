//! `include/klock.h` is what cbindgen makes of `src/` with `cbindgen.toml`:
//! regenerate it and compare, so the committed header cannot drift.
//! `KLOCK_BLESS_HEADER=1` rewrites the file instead.

use std::path::Path;

#[test]
fn header_is_up_to_date() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let bindings = cbindgen::Builder::new()
        .with_crate(dir)
        .with_config(config)
        .generate()
        .expect("cbindgen failed on klock-ffi/src");
    let mut fresh = Vec::new();
    bindings.write(&mut fresh);
    let fresh = String::from_utf8(fresh).expect("UTF-8 header");
    let path = dir.join("include/klock.h");
    if std::env::var_os("KLOCK_BLESS_HEADER").is_some() {
        std::fs::write(&path, &fresh).expect("write include/klock.h");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == fresh,
        "klock-ffi/include/klock.h is out of date with klock-ffi/src: run \
         `KLOCK_BLESS_HEADER=1 cargo test -p klock-ffi --test header` and commit it"
    );
}
