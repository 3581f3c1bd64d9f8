//! The wait's deadline arithmetic.

use super::*;

#[test]
fn timeouts_round_up_to_whole_seconds_and_never_mean_forever() {
    assert_eq!(timeout_arg(Duration::ZERO), 1);
    assert_eq!(timeout_arg(Duration::from_millis(1)), 1);
    assert_eq!(timeout_arg(Duration::from_secs(1)), 1);
    assert_eq!(timeout_arg(Duration::from_millis(1500)), 2);
    assert_eq!(timeout_arg(Duration::from_secs(30)), 30);
    assert_eq!(timeout_arg(Duration::MAX), u32::MAX);
    assert_ne!(timeout_arg(Duration::from_nanos(1)), WAIT_FOREVER);
}

#[test]
fn event_sync_slices_are_whole_ms_at_most_the_slice_and_never_0() {
    assert_eq!(slice_ms(Duration::ZERO), 1);
    assert_eq!(slice_ms(Duration::from_micros(300)), 1);
    assert_eq!(slice_ms(Duration::from_micros(1500)), 2);
    assert_eq!(slice_ms(Duration::from_millis(7)), 7);
    assert_eq!(slice_ms(Duration::from_secs(10)), 50);
    assert_eq!(slice_ms(Duration::MAX), 50);
}

#[test]
fn only_the_wait_timeout_code_is_a_timeout() {
    assert!(is_wait_timeout(107019));
    assert!(!is_wait_timeout(0));
    assert!(!is_wait_timeout(507899));
}
