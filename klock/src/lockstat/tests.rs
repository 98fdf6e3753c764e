use super::report::{lm_pct, lm_time};
use super::tracked::short_type_name;
use super::*;

#[test]
fn formats() {
    assert_eq!(lm_time(500.0), "0.5us");
    assert_eq!(lm_time(385_000.0), "385us");
    assert_eq!(lm_time(20_000_000.0), "20ms");
    assert_eq!(lm_pct(72.31), "72.3%");
    assert_eq!(lm_pct(0.82), "0.82%");
    assert_eq!(lm_pct(0.0), "0%");
    assert_eq!(lm_pct(100.0), "100%");
    assert_eq!(
        short_type_name::<crate::RawQSpinLock32>(),
        "RawQSpinLockWith<512>"
    );
    #[cfg(target_arch = "x86_64")]
    assert_eq!(
        short_type_name::<crate::RawQSpinLock>(),
        "RawQSpinLockWith<512, true, Word64>"
    );
    assert_eq!(
        short_type_name::<Option<crate::RawQSpinLock32>>(),
        "Option<RawQSpinLockWith<512>>"
    );
    assert_eq!(short_type_name::<u32>(), "u32");
}

#[test]
fn merge_keeps_min_of_nonzero() {
    let mut a = SideStats {
        wait_min_ns: 0,
        hold_min_ns: 7,
        ..Default::default()
    };
    a.merge(&SideStats {
        wait_min_ns: 5,
        hold_min_ns: 3,
        acquisitions: 2,
        ..Default::default()
    });
    assert_eq!((a.wait_min_ns, a.hold_min_ns, a.acquisitions), (5, 3, 2));
}
