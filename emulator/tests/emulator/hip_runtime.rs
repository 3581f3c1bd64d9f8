//! The HIP runtime, memory and peer functions of the emulator through its C ABI
//! (`HipApi`), in child processes with their own state directories, in HIP 6.x and 5.x
//! modes: versions, devices per thread, copies of every kind, `hipMemset`, address
//! ranges, peer access, error names and strings; plus in-process checks of the table
//! itself (emulated source, no vendor symbol exported).

use std::ffi::CStr;

use crate::hip_support::*;
use devipc_emulator::hip::rules;
use devipc_hip_sys::*;

/// Entry point of the child processes (a no-op in the parent run).
#[test]
fn child_role() {
    child_main();
}

fn versions_and_devices(version: &str, encoded: &str) {
    let root = TestRoot::new(&format!("devices-{version}"));
    let mut a = Hip::spawn("a", &root, version, &[("DEVIPC_EMU_DEVICES", "3")]);
    let v = a.ok("version");
    assert_eq!((v.val(0), v.val(1), v.val(2)), (encoded, "0", encoded));
    a.expect_code("version_null", hipErrorInvalidValue);
    a.ok("init 0");
    a.expect_rule(
        "init 1",
        hipErrorInvalidValue,
        rules::INIT_FLAGS_MUST_BE_ZERO,
    );
    assert_eq!(a.ok("count").val(0), "3");
    // Each thread starts on device 0; the current device is per thread.
    assert_eq!(a.ok("getdev").val(0), "0");
    a.ok("setdev 2");
    assert_eq!(a.ok("getdev").val(0), "2");
    assert_eq!(a.ok("getdev_thread").val(0), "0");
    for bad in ["3", "-1", "64", "2147483647"] {
        a.expect_code(&format!("setdev {bad}"), hipErrorInvalidDevice);
    }
    assert_eq!(
        a.ok("getdev").val(0),
        "2",
        "a failed hipSetDevice changes nothing"
    );
    // Memory goes to the current device.
    let p = a.ok("malloc 8192").num(0);
    assert_eq!(root.used(2), 8192);
    a.ok("devsync");
    a.ok(&format!("free {}", hexptr(p)));

    // Default: two devices.
    let mut b = Hip::spawn("b", &root, version, &[]);
    assert_eq!(b.ok("count").val(0), "2");
    b.expect_code("setdev 2", hipErrorInvalidDevice);

    // No device at all.
    let mut c = Hip::spawn("c", &root, version, &[("DEVIPC_EMU_DEVICES", "0")]);
    let r = c.expect_code("count", hipErrorNoDevice);
    assert_eq!(r.val(0), "0", "hipGetDeviceCount writes 0 before failing");
    c.expect_code("init 0", hipErrorInvalidDevice);
    // As ROCm 5.2 measured: without a device, hipInit fails before it looks at the flags.
    c.expect_code("init 1", hipErrorInvalidDevice);
    c.expect_code("getdev", hipErrorNoDevice);
    c.expect_code("malloc 16", hipErrorInvalidDevice);
    c.expect_code("setdev 0", hipErrorInvalidDevice);
    for child in [a, b, c] {
        child.exit();
    }
    root.assert_clean();
}

#[test]
fn versions_and_devices_6x() {
    versions_and_devices("6.2", "60200000");
}

#[test]
fn versions_and_devices_5x() {
    versions_and_devices("5.2", "50200000");
}

#[test]
fn unusable_configuration_is_not_initialized() {
    let root = TestRoot::new("badconfig");
    let mut a = Hip::spawn("a", &root, "6.2", &[("DEVIPC_EMU_DEVICES", "lots")]);
    a.expect_code("count", hipErrorNotInitialized);
    assert!(a.run("lasterr").rest.contains("DEVIPC_EMU_DEVICES"));
    a.expect_code("malloc 16", hipErrorNotInitialized);
    // Names still work without a configuration.
    assert_eq!(a.ok("errname 201").val(0), "hipErrorInvalidContext");
    a.exit();
    assert!(!root.emu_dir().exists(), "nothing was created");
}

fn copies_and_ranges(version: &str) {
    let root = TestRoot::new(&format!("copies-{version}"));
    let mut a = Hip::spawn("a", &root, version, &[]);
    let size = 100_000u64;
    let p = a.ok(&format!("malloc {size}")).num(0);
    let q = a.ok(&format!("malloc {size}")).num(0);
    // Every kind that moves host bytes in and out.
    for (fill_kind, check_kind) in [
        (hipMemcpyHostToDevice, hipMemcpyDeviceToHost),
        (hipMemcpyDefault, hipMemcpyDefault),
        (hipMemcpyHostToHost, hipMemcpyHostToHost),
    ] {
        a.ok(&format!(
            "fill {} 5000 {fill_kind} {fill_kind}",
            hexptr(p + 10)
        ));
        let r = a.ok(&format!(
            "check {} 5000 {fill_kind} {check_kind}",
            hexptr(p + 10)
        ));
        assert_eq!(r.val(0), "same", "kinds {fill_kind}/{check_kind}");
    }
    // Device to device, and hipMemcpyDefault between device pointers.
    a.ok(&format!("fill {} 5000 42", hexptr(p)));
    a.ok(&format!(
        "memcpy {} {} 5000 {hipMemcpyDeviceToDevice}",
        hexptr(q),
        hexptr(p)
    ));
    assert_eq!(a.ok(&format!("check {} 5000 42", hexptr(q))).val(0), "same");
    a.ok(&format!(
        "memcpy {} {} 5000 {hipMemcpyDefault}",
        hexptr(q + 50_000),
        hexptr(p)
    ));
    assert_eq!(
        a.ok(&format!("check {} 5000 42", hexptr(q + 50_000)))
            .val(0),
        "same"
    );
    // Overlapping copy inside one allocation.
    a.ok(&format!("memcpy {} {} 5000 3", hexptr(p + 1), hexptr(p)));
    assert_eq!(
        a.ok(&format!("check {} 5000 42", hexptr(p + 1))).val(0),
        "same"
    );
    // hipMemcpyDeviceToDeviceNoCU exists from 6.1 on.
    let nocu = format!(
        "memcpy {} {} 16 {hipMemcpyDeviceToDeviceNoCU}",
        hexptr(q),
        hexptr(p)
    );
    if version.starts_with('6') {
        a.ok(&nocu);
    } else {
        a.expect_code(&nocu, hipErrorInvalidMemcpyDirection);
    }
    a.expect_code(
        &format!("memcpy {} {} 16 7", hexptr(q), hexptr(p)),
        hipErrorInvalidMemcpyDirection,
    );
    // Device operands must lie inside device memory of this process.
    a.expect_code(
        &format!("fill {} 100 1", hexptr(p + size - 50)),
        hipErrorInvalidValue,
    );
    a.expect_code("fill 0x1000 100 1", hipErrorInvalidValue);
    a.expect_code(
        &format!("check {} 100 1", hexptr(q + size)),
        hipErrorInvalidValue,
    );
    a.expect_code(
        &format!("memcpy {} {} {size} 3", hexptr(q), hexptr(p + 1)),
        hipErrorInvalidValue,
    );
    a.expect_code(
        &format!("memcpy 0x0 {} 16 3", hexptr(p)),
        hipErrorInvalidValue,
    );
    a.ok("memcpy 0x0 0x0 0 3");
    // hipMemset.
    a.ok(&format!("memset {} 0x1ab {size}", hexptr(p)));
    assert_eq!(
        a.ok(&format!("readbyte {}", hexptr(p + size - 1))).val(0),
        "171"
    );
    a.expect_code(
        &format!("memset {} 0 2", hexptr(p + size - 1)),
        hipErrorInvalidValue,
    );
    a.expect_code("memset 0x1000 0 2", hipErrorInvalidValue);
    a.ok("memset 0x0 0 0");
    // Address ranges: interior pointers resolve, the end does not.
    let r = a.ok(&format!("range {}", hexptr(p + size - 1)));
    assert_eq!((r.num(0), r.num(1)), (p, size));
    // Unknown pointers: hipErrorNotFound from 6.0, hipErrorInvalidDevicePointer before.
    let unknown = if address_range_not_found(version) {
        a.expect_rule(
            &format!("range {}", hexptr(p + size + 4096 * 64)),
            hipErrorNotFound,
            rules::MEM_ADDRESS_RANGE_UNKNOWN_NOT_FOUND,
        );
        hipErrorNotFound
    } else {
        a.expect_code(
            &format!("range {}", hexptr(p + size + 4096 * 64)),
            hipErrorInvalidDevicePointer,
        );
        hipErrorInvalidDevicePointer
    };
    a.ok(&format!("free {}", hexptr(p)));
    a.ok(&format!("free {}", hexptr(q)));
    a.expect_code(&format!("free {}", hexptr(q)), hipErrorInvalidValue);
    a.expect_code(&format!("range {}", hexptr(q)), unknown);
    a.exit();
    root.assert_clean();
}

#[test]
fn copies_and_ranges_6x() {
    copies_and_ranges("6.2");
}

#[test]
fn copies_and_ranges_5x() {
    copies_and_ranges("5.2");
}

#[test]
fn peer_access() {
    let root = TestRoot::new("peers");
    let mut a = Hip::spawn("a", &root, "6.2", &[("DEVIPC_EMU_DEVICES", "3")]);
    assert_eq!(a.ok("can_peer 0 1").val(0), "1");
    assert_eq!(a.ok("can_peer 2 0").val(0), "1");
    assert_eq!(a.ok("can_peer 1 1").val(0), "0");
    a.expect_code("can_peer 0 3", hipErrorInvalidDevice);
    a.expect_code("can_peer -1 0", hipErrorInvalidDevice);
    a.expect_code("can_peer_null 0 1", hipErrorInvalidValue);
    a.expect_rule(
        "enable_peer 1 1",
        hipErrorInvalidValue,
        rules::PEER_ENABLE_FLAGS_MUST_BE_ZERO,
    );
    a.expect_rule(
        "enable_peer 0 0",
        hipErrorInvalidDevice,
        rules::PEER_SELF_IS_NOT_A_PEER,
    );
    a.expect_code("enable_peer 3 0", hipErrorInvalidDevice);
    a.ok("enable_peer 1 0");
    a.expect_rule(
        "enable_peer 1 0",
        hipErrorPeerAccessAlreadyEnabled,
        rules::PEER_ALREADY_ENABLED_REJECTED,
    );
    a.ok("enable_peer 2 0");
    // Per current device: from device 1 to 0 is another pair.
    a.ok("setdev 1");
    a.ok("enable_peer 0 0");
    a.expect_code("enable_peer 0 0", hipErrorPeerAccessAlreadyEnabled);
    // Per process: another process starts with nothing enabled.
    let mut b = Hip::spawn("b", &root, "6.2", &[("DEVIPC_EMU_DEVICES", "3")]);
    b.ok("enable_peer 1 0");
    a.exit();
    b.exit();
    root.assert_clean();
}

fn error_texts(version: &str) {
    let root = TestRoot::new(&format!("errors-{version}"));
    let mut a = Hip::spawn("a", &root, version, &[]);
    for (code, name) in [
        (0, "hipSuccess"),
        (1, "hipErrorInvalidValue"),
        (9, "hipErrorInvalidConfiguration"),
        (101, "hipErrorInvalidDevice"),
        (201, "hipErrorInvalidContext"),
        (500, "hipErrorNotFound"),
        (600, "hipErrorNotReady"),
        (704, "hipErrorPeerAccessAlreadyEnabled"),
        (911, "hipErrorUnknown"),
        (1054, "hipErrorTbd"),
        (-5, "hipErrorUnknown"),
        (123_456, "hipErrorUnknown"),
    ] {
        assert_eq!(a.ok(&format!("errname {code}")).rest, name, "{code}");
    }
    let expected_201 = if version.starts_with('5') {
        "hipErrorInvalidContext"
    } else {
        "invalid device context"
    };
    assert_eq!(a.ok("errstring 201").rest, expected_201);
    // Right after a failure, hipGetErrorString names the rule; another code does not.
    let zero = "00".repeat(64);
    let r = a.run(&format!("errstring_now open {zero} {}", lazy(version)));
    assert_eq!(r.code, hipErrorInvalidValue);
    assert!(r.rest.starts_with(if version.starts_with('5') {
        "hipErrorInvalidValue: hipIpcOpenMemHandle: "
    } else {
        "invalid argument: hipIpcOpenMemHandle: "
    }));
    assert!(
        r.rest.ends_with("[rule hip.mem.invalid-handle-rejected]"),
        "{}",
        r.rest
    );
    assert_eq!(a.ok("errstring 201").rest, expected_201);
    // The last error survives later successful calls (only hipGetErrorString's window
    // closes).
    a.ok("count");
    let last = a.run("lasterr").rest;
    assert!(last.starts_with("hipIpcOpenMemHandle: "), "{last}");
    assert!(!a.ok("errstring 1").rest.contains("[rule"));
    a.exit();
    root.assert_clean();
}

#[test]
fn error_names_and_strings_6x() {
    error_texts("6.2");
}

#[test]
fn error_names_and_strings_5x() {
    error_texts("5.2");
}

#[test]
fn the_table_is_emulated_and_exports_no_vendor_symbol() {
    // Pure calls only: this process has no state directory of its own.
    let api = devipc_emulator::hip_api();
    assert!(api.source().is_emulated());
    // SAFETY: hipGetErrorName takes any code and returns a static string.
    let name = unsafe { CStr::from_ptr((api.hipGetErrorName)(hipErrorInvalidContext)) };
    assert_eq!(name.to_str().unwrap(), "hipErrorInvalidContext");
    // The vendor names are not in the dynamic symbol table of this process.
    for symbol in [c"hipInit", c"hipIpcOpenMemHandle", c"hipGetErrorName"] {
        // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name only looks it up.
        let found = unsafe { libc::dlsym(libc::RTLD_DEFAULT, symbol.as_ptr()) };
        assert!(found.is_null(), "{symbol:?} is exported");
    }
}

#[test]
fn the_rule_catalogue_is_complete() {
    // Every rule has a documented code of the HIP enum and a source.
    for r in rules::ALL {
        assert!(error_name(r.code).is_some(), "{}", r.id);
        assert!(
            r.source.contains("api-facts") || r.source.contains("DESIGN"),
            "{}",
            r.id
        );
    }
    assert!(rules::ALL.len() >= 20);
}
