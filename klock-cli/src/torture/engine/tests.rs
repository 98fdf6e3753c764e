use super::super::busted::LockBusted;
use super::*;
use crate::bench::peers::{ParkingLotMutex, ParkingLotRwLock};

fn cfg(nreaders: usize) -> Config {
    Config {
        type_name: "test".into(),
        nwriters: 3,
        nreaders,
        duration: Duration::from_millis(300),
        stat_interval: Duration::from_millis(100),
        long_hold: Duration::from_millis(5),
        stutter: Duration::from_millis(100),
        watchdog: Duration::from_secs(5),
    }
}

#[test]
fn library_run_passes_a_correct_lock_and_fails_a_busted_one() {
    let ok = run::<ParkingLotMutex>(&cfg(0));
    assert!(ok.success && !ok.stalled && ok.writes > 0, "{ok:?}");
    let rw = run::<ParkingLotRwLock>(&cfg(2));
    assert!(rw.success && rw.reads > 0, "{rw:?}");
    let bad = run::<LockBusted>(&cfg(0));
    assert!(
        !bad.success && bad.write_fails > 0 && !bad.stalled,
        "{bad:?}"
    );
}

#[test]
fn durations_read_well() {
    assert_eq!(fmt_ns(999), "999ns");
    assert_eq!(fmt_ns(1_500), "1.5µs");
    assert_eq!(fmt_ns(5_000_000), "5.0ms");
    assert_eq!(fmt_ns(50_200_000), "50.2ms");
    assert_eq!(fmt_ns(12_000_000_000), "12.00s");
}
