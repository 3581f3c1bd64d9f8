//! Issue 25: what AMD's VMM tests call before any `hipMem*` function, exported by the
//! emulator with CLR's semantics: `hipDeviceGet`, `hipDeviceGetAttribute`
//! (`hipDeviceAttributeVirtualMemoryManagementSupported`) and the driver-style copies
//! `hipMemcpyHtoD` / `hipMemcpyDtoH`, in a real child process, with each rule's violation
//! and, where the rule can be switched off, a broken run.
//!
//! The shell commands (`dq_*`) are executed by [`execute`], reached from the HIP shell of
//! `hip_support`.

use std::ffi::{c_int, c_void};

use crate::hip_support::*;
use devipc_emulator::hip::rules::*;
use devipc_hip_sys::*;

/// Entry point of the child processes (a no-op in the parent run).
#[test]
fn child_role() {
    child_main();
}

/// The rules of these calls, for `hip_break_rules::every_rule_has_a_break_scenario`.
pub const COVERED: &[&str] = &[
    DEVICE_GET_CHECKS_ORDINAL,
    DEVICE_VMM_ATTRIBUTE_REPORTED,
    MEM_HTOD_DTOH_ARE_DIRECTED_COPIES,
];

const VMM_ATTR: i32 = hipDeviceAttributeVirtualMemoryManagementSupported;

// ---------------------------------------------------------------------------------------
// Child side: the `dq_*` shell commands.

/// Whether `cmd` is one of this module's shell commands.
pub fn is_command(cmd: &str) -> bool {
    cmd.starts_with("dq_")
}

/// Runs one `dq_*` command; returns `<code> <values...>`.
pub fn execute(words: &[&str]) -> String {
    let api = devipc_emulator::hip_api();
    let num = |i: usize| words.get(i).and_then(|w| parse_num(w)).unwrap_or(0);
    let int = |i: usize| num(i) as i64 as c_int;
    let p = |i: usize| num(i) as usize as *mut c_void;
    macro_rules! call {
        ($name:ident($($a:expr),* $(,)?)) => {{
            let f = api.$name.expect(concat!(stringify!($name), " in the table"));
            // SAFETY: the shell passes pointers to live locals or values the emulator
            // handed out (or deliberately bad ones, which the emulator must reject).
            unsafe { f($($a),*) }
        }};
    }
    match words[0] {
        // dq_get <ordinal>: code and the handle written (-9: none).
        "dq_get" => {
            let mut d: hipDevice_t = -9;
            let c = call!(hipDeviceGet(&mut d, int(1)));
            format!("{c} {d}")
        }
        "dq_get_null" => format!("{}", call!(hipDeviceGet(std::ptr::null_mut(), int(1)))),
        // dq_attr <attr> <device>: code and the value written (-9: none).
        "dq_attr" => {
            let mut v: c_int = -9;
            let c = call!(hipDeviceGetAttribute(&mut v, int(1), int(2)));
            format!("{c} {v}")
        }
        "dq_attr_null" => format!(
            "{}",
            call!(hipDeviceGetAttribute(std::ptr::null_mut(), int(1), int(2)))
        ),
        // dq_htod <dst> <len> <seed>: hipMemcpyHtoD of the pattern.
        "dq_htod" => {
            let mut data = pattern(num(3) as u8, num(2) as usize);
            let c = call!(hipMemcpyHtoD(p(1), data.as_mut_ptr().cast(), data.len()));
            format!("{c}")
        }
        // dq_dtoh <src> <len> <seed>: hipMemcpyDtoH, compared with the pattern.
        "dq_dtoh" => {
            let len = num(2) as usize;
            let want = pattern(num(3) as u8, len);
            let mut got = vec![0u8; len];
            let c = call!(hipMemcpyDtoH(got.as_mut_ptr().cast(), p(1), len));
            let verdict = if got == want { "same" } else { "differs" };
            format!("{c} {verdict}")
        }
        other => format!("{hipErrorInvalidValue} unknown command {other}"),
    }
}

// ---------------------------------------------------------------------------------------
// Parent side.

#[test]
fn device_get_writes_visible_ordinals_only() {
    let root = TestRoot::new("hip-dq-get");
    let mut a = Hip::spawn("a", &root, "6.2", &[("DEVIPC_EMU_DEVICES", "2")]);
    assert_eq!(a.ok("dq_get 0").num(0), 0);
    assert_eq!(a.ok("dq_get 1").num(0), 1);
    for bad in ["2", "-1"] {
        a.expect_rule(
            &format!("dq_get {bad}"),
            hipErrorInvalidDevice,
            DEVICE_GET_CHECKS_ORDINAL,
        );
    }
    a.expect_code("dq_get_null 0", hipErrorInvalidValue);
    a.exit();
    // The visibility masks decide what an ordinal is.
    let mut b = Hip::spawn(
        "b",
        &root,
        "6.2",
        &[("DEVIPC_EMU_DEVICES", "2"), ("HIP_VISIBLE_DEVICES", "1")],
    );
    assert_eq!(b.ok("dq_get 0").num(0), 0);
    b.expect_code("dq_get 1", hipErrorInvalidDevice);
    b.exit();
    root.assert_clean();
}

#[test]
fn vmm_attribute_is_reported_from_rocm_5_3() {
    for version in ["5.2", "5.3", "6.2", "7.12"] {
        let root = TestRoot::new(&format!("hip-dq-attr-{version}"));
        let mut a = Hip::spawn("a", &root, version, &[]);
        if version == "5.2" {
            // ROCm 5.2's enum ends at MemoryPoolsSupported (88): not an attribute there.
            a.expect_code(&format!("dq_attr {VMM_ATTR} 0"), hipErrorInvalidValue);
        } else {
            assert_eq!(
                a.ok(&format!("dq_attr {VMM_ATTR} 0")).num(0),
                1,
                "{version}"
            );
        }
        // CLR's order: NULL out pointer, then the device, then the attribute.
        a.expect_code(&format!("dq_attr_null {VMM_ATTR} 9"), hipErrorInvalidValue);
        a.expect_code(&format!("dq_attr {VMM_ATTR} 9"), hipErrorInvalidDevice);
        a.expect_code("dq_attr 7777 9", hipErrorInvalidDevice);
        let r = a.run("dq_attr 7777 0");
        assert_eq!((r.code, r.num(0) as i64), (hipErrorInvalidValue, -9));
        a.exit();
        root.assert_clean();
    }
}

#[test]
fn htod_and_dtoh_copy_like_hipmemcpy() {
    let root = TestRoot::new("hip-dq-copy");
    let mut a = Hip::spawn("a", &root, "6.2", &[]);
    let m = a.ok("malloc 65536").val(0).to_owned();
    a.ok(&format!("dq_htod {m} 65536 4"));
    assert_eq!(a.ok(&format!("check {m} 65536 4")).val(0), "same");
    a.ok(&format!("fill {m} 4096 5"));
    assert_eq!(a.ok(&format!("dq_dtoh {m} 4096 5")).val(0), "same");
    // The device operand is checked as hipMemcpy checks it.
    a.expect_code(&format!("dq_htod {m} 65537 4"), hipErrorInvalidValue);
    a.expect_code("dq_dtoh 0x1000 16 4", hipErrorInvalidValue);
    // Nothing to copy is no error.
    a.ok(&format!("dq_htod {m} 0 4"));
    a.ok(&format!("free {m}"));
    a.exit();
    root.assert_clean();
}

#[test]
fn broken_device_query_rules_change_the_outcome() {
    let root = TestRoot::new("hip-dq-broken-get");
    let mut a = Hip::spawn(
        "a",
        &root,
        "6.2",
        &[("DEVIPC_EMU_BREAK_RULE", DEVICE_GET_CHECKS_ORDINAL)],
    );
    assert_eq!(a.ok("dq_get 5").num(0), 5);
    a.exit();
    root.assert_clean();

    let root = TestRoot::new("hip-dq-broken-attr");
    let mut a = Hip::spawn(
        "a",
        &root,
        "6.2",
        &[("DEVIPC_EMU_BREAK_RULE", DEVICE_VMM_ATTRIBUTE_REPORTED)],
    );
    assert_eq!(a.ok(&format!("dq_attr {VMM_ATTR} 0")).num(0), 0);
    a.exit();
    root.assert_clean();

    let root = TestRoot::new("hip-dq-broken-copy");
    let mut a = Hip::spawn(
        "a",
        &root,
        "6.2",
        &[("DEVIPC_EMU_BREAK_RULE", MEM_HTOD_DTOH_ARE_DIRECTED_COPIES)],
    );
    let m = a.ok("malloc 4096").val(0).to_owned();
    a.ok(&format!("dq_htod {m} 4096 4"));
    assert_eq!(a.ok(&format!("check {m} 4096 4")).val(0), "differs@0");
    a.ok(&format!("fill {m} 4096 5"));
    assert_eq!(a.ok(&format!("dq_dtoh {m} 4096 5")).val(0), "differs");
    // The operands are still checked.
    a.expect_code(&format!("dq_htod {m} 4097 4"), hipErrorInvalidValue);
    a.ok(&format!("free {m}"));
    a.exit();
    root.assert_clean();
}
