//! Issue 25: `hipMemcpyBatchAsync` (HIP 7.1) in a real child process: its argument
//! checks, `*failIdx`, the copies before a failing descriptor, the null stream, the
//! version it appears in, and each rule switched off.
//!
//! The shell command `hb_copy` is executed by [`execute`], reached from the HIP shell of
//! `hip_support`.

use std::ffi::c_void;

use crate::hip_support::*;
use devipc_emulator::hip::rules::*;
use devipc_hip_sys::*;

/// Entry point of the child processes (a no-op in the parent run).
#[test]
fn child_role() {
    child_main();
}

/// The rules of the batch, for `hip_break_rules::every_rule_has_a_break_scenario`.
pub const COVERED: &[&str] = &[
    BATCH_ARGUMENTS_REQUIRED,
    BATCH_ATTRS_NOT_SUPPORTED,
    BATCH_ZERO_SIZE_REJECTED,
    BATCH_FAIL_INDEX_REPORTED,
    BATCH_EARLIER_COPIES_RUN,
    BATCH_NULL_STREAM_ACCEPTED,
];

/// What `*failIdx` holds before the call.
const UNTOUCHED: u64 = 0x5eed;

// ---------------------------------------------------------------------------------------
// Child side: the `hb_*` shell command.

/// Whether `cmd` is one of this module's shell commands.
pub fn is_command(cmd: &str) -> bool {
    cmd.starts_with("hb_")
}

/// `hb_copy <count> <numAttrs> <null dsts 0|1> [<dst> <src> <len>]...`: the batch on the
/// null stream, then (if it succeeded) `hipStreamSynchronize`; returns `<code> <failIdx>`.
pub fn execute(words: &[&str]) -> String {
    let api = devipc_emulator::hip_api();
    let num = |i: usize| words.get(i).and_then(|w| parse_num(w)).unwrap_or(0);
    let Some(f) = api.hipMemcpyBatchAsync else {
        return format!("{hipErrorNotSupported} {UNTOUCHED}");
    };
    let (count, num_attrs, null_dsts) = (num(1) as usize, num(2) as usize, num(3) == 1);
    let mut dsts: Vec<*mut c_void> = Vec::new();
    let mut srcs: Vec<*mut c_void> = Vec::new();
    let mut sizes: Vec<usize> = Vec::new();
    let mut i = 4;
    while i + 2 < words.len() {
        dsts.push(num(i) as usize as *mut c_void);
        srcs.push(num(i + 1) as usize as *mut c_void);
        sizes.push(num(i + 2) as usize);
        i += 3;
    }
    let mut attrs = vec![hipMemcpyAttributes::default(); num_attrs.max(1)];
    let mut idxs = vec![0usize; num_attrs.max(1)];
    let mut fail_idx = UNTOUCHED as usize;
    let d = if null_dsts {
        std::ptr::null_mut()
    } else {
        dsts.as_mut_ptr()
    };
    // SAFETY: the arrays hold `count` descriptors (the tests pass that many), the
    // attribute arrays `numAttrs`; the operands are device memory of this child (or
    // deliberately bad, which the emulator must refuse); the stream is synchronised below.
    let code = unsafe {
        f(
            d,
            srcs.as_mut_ptr(),
            sizes.as_mut_ptr(),
            count,
            attrs.as_mut_ptr(),
            idxs.as_mut_ptr(),
            num_attrs,
            &mut fail_idx,
            std::ptr::null_mut(),
        )
    };
    // The copies before a failing descriptor run all the same; wait for them (the
    // synchronisation is skipped after a failure so that hipGetErrorString still
    // describes it: the next `check` waits, being null-stream work).
    let code = if code == hipSuccess {
        // SAFETY: the null stream.
        unsafe { (api.hipStreamSynchronize)(std::ptr::null_mut()) }
    } else {
        code
    };
    format!("{code} {fail_idx}")
}

// ---------------------------------------------------------------------------------------
// Parent side.

/// A 7.1 child with three 4 KiB buffers filled with patterns 1, 2, 3.
fn child(root: &TestRoot, env: &[(&str, &str)]) -> (Hip, [String; 3]) {
    let mut a = Hip::spawn("a", root, "7.1", env);
    let bufs = [1, 2, 3].map(|seed| {
        let m = a.ok("malloc 4096").val(0).to_owned();
        a.ok(&format!("fill {m} 4096 {seed}"));
        m
    });
    (a, bufs)
}

fn fail_idx(r: &Reply) -> u64 {
    r.num(0)
}

#[test]
fn the_vendor_rules_hold_in_7_1() {
    let root = TestRoot::new("hip-batch");
    let (mut a, [x, y, z]) = child(&root, &[]);
    // Arguments: count 0, NULL dsts; *failIdx untouched.
    let r = a.expect_code(&format!("hb_copy 0 0 0 {y} {x} 4096"), hipErrorInvalidValue);
    assert_eq!(fail_idx(&r), UNTOUCHED);
    a.expect_rule(
        &format!("hb_copy 1 0 1 {y} {x} 4096"),
        hipErrorInvalidValue,
        BATCH_ARGUMENTS_REQUIRED,
    );
    // Attributes are not supported.
    a.expect_rule(
        &format!("hb_copy 1 1 0 {y} {x} 4096"),
        hipErrorNotSupported,
        BATCH_ATTRS_NOT_SUPPORTED,
    );
    assert_eq!(a.ok(&format!("check {y} 4096 2")).val(0), "same");
    // A zero size fails, *failIdx names it.
    let r = a.expect_code(
        &format!("hb_copy 2 0 0 {y} {x} 64 {z} {x} 0"),
        hipErrorInvalidValue,
    );
    assert_eq!(fail_idx(&r), 1);
    a.expect_rule(
        &format!("hb_copy 2 0 0 {y} {x} 64 {z} {x} 0"),
        hipErrorInvalidValue,
        BATCH_ZERO_SIZE_REJECTED,
    );
    // Success on the null stream: SIZE_MAX, every copy done.
    let r = a.ok(&format!("hb_copy 2 0 0 {y} {x} 4096 {z} {x} 128"));
    assert_eq!(fail_idx(&r), u64::MAX);
    assert_eq!(a.ok(&format!("check {y} 4096 1")).val(0), "same");
    assert_eq!(a.ok(&format!("check {z} 128 1")).val(0), "same");
    // A descriptor past its allocation: the copies before it ran, the ones after did not.
    a.ok(&format!("fill {y} 4096 2"));
    a.ok(&format!("fill {z} 4096 3"));
    let past = parse_num(&z).unwrap() + 8;
    let r = a.expect_code(
        &format!("hb_copy 3 0 0 {y} {x} 4096 {past:#x} {x} 4096 {z} {x} 4096"),
        hipErrorInvalidValue,
    );
    assert_eq!(fail_idx(&r), 1);
    assert_eq!(a.ok(&format!("check {y} 4096 1")).val(0), "same");
    assert_eq!(a.ok(&format!("check {z} 4096 3")).val(0), "same");
    for m in [x, y, z] {
        a.ok(&format!("free {m}"));
    }
    a.exit();
    root.assert_clean();
}

#[test]
fn the_function_is_missing_before_7_1() {
    let root = TestRoot::new("hip-batch-6.2");
    let mut a = Hip::spawn("a", &root, "6.2", &[]);
    let r = a.expect_code("hb_copy 0 0 0", hipErrorNotSupported);
    assert_eq!(fail_idx(&r), UNTOUCHED);
    a.exit();
    root.assert_clean();
}

#[test]
fn broken_batch_rules_change_the_outcome() {
    let broken = |rule: &str, scenario: &dyn Fn(&mut Hip, &[String; 3])| {
        let root = TestRoot::new(&format!("hip-batch-broken-{}", rule.replace('.', "-")));
        let (mut a, bufs) = child(&root, &[("DEVIPC_EMU_BREAK_RULE", rule)]);
        scenario(&mut a, &bufs);
        for m in bufs {
            a.ok(&format!("free {m}"));
        }
        a.exit();
        root.assert_clean();
    };
    broken(BATCH_ARGUMENTS_REQUIRED, &|a, [x, y, _]| {
        a.ok(&format!("hb_copy 0 0 0 {y} {x} 4096"));
    });
    broken(BATCH_ATTRS_NOT_SUPPORTED, &|a, [x, y, _]| {
        a.ok(&format!("hb_copy 1 1 0 {y} {x} 4096"));
        assert_eq!(a.ok(&format!("check {y} 4096 1")).val(0), "same");
    });
    broken(BATCH_ZERO_SIZE_REJECTED, &|a, [x, y, z]| {
        a.ok(&format!("hb_copy 2 0 0 {y} {x} 64 {z} {x} 0"));
    });
    broken(BATCH_FAIL_INDEX_REPORTED, &|a, [x, y, _]| {
        let r = a.ok(&format!("hb_copy 1 0 0 {y} {x} 64"));
        assert_eq!(fail_idx(&r), UNTOUCHED);
    });
    broken(BATCH_EARLIER_COPIES_RUN, &|a, [x, y, z]| {
        let past = parse_num(z).unwrap() + 8;
        a.expect_code(
            &format!("hb_copy 2 0 0 {y} {x} 4096 {past:#x} {x} 4096"),
            hipErrorInvalidValue,
        );
        assert_eq!(a.ok(&format!("check {y} 4096 2")).val(0), "same");
    });
    broken(BATCH_NULL_STREAM_ACCEPTED, &|a, [x, y, _]| {
        a.expect_code(&format!("hb_copy 1 0 0 {y} {x} 64"), hipErrorInvalidValue);
    });
}
