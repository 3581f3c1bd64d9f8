//! The entry points AMD's hip-tests IPC cases and frameworks' IPC paths call beyond the
//! core IPC set (issue 11): `hipPointerGetAttributes`, `hipHostMalloc` / `hipHostFree`,
//! `hipMemcpyAsync` (on an imported pointer, across processes, with a held stream),
//! `hipEventCreate` / `hipEventElapsedTime`, `hipCtxCreate` and `hipGetProcAddress`, each
//! at ROCm 5.2 and 6.2 where their answers differ.

use crate::hip_support::*;
use devipc_hip_sys::*;

/// Entry point of the child processes (a no-op in the parent run).
#[test]
fn child_role() {
    child_main();
}

/// `hipMemoryType` of `kind` as `version` numbers it.
fn mem_type(kind: MemoryKind, version: &str) -> i64 {
    let encoded = if at_least(version, 6, 0) {
        60_200_000
    } else {
        50_200_000
    };
    i64::from(memory_type_value(kind, encoded).expect("the version has the kind"))
}

fn pointer_attributes(version: &str) {
    let root = TestRoot::new(&format!("attrs-{version}"));
    let env = [("DEVIPC_EMU_DEVICES", "2")];
    let mut a = Hip::spawn("exporter", &root, version, &env);
    let mut b = Hip::spawn("importer", &root, version, &env);
    let device = mem_type(MemoryKind::Device, version);
    let host = mem_type(MemoryKind::Host, version);

    // hipMalloc memory on device 1, queried at an interior pointer.
    a.ok("setdev 1");
    let p = a.ok("malloc 65536").num(0);
    a.ok("setdev 0");
    let r = a.ok(&format!("attrs {}", hexptr(p + 100)));
    assert_eq!(
        r.num(0) as i64,
        device,
        "{version}: type of hipMalloc memory"
    );
    assert_eq!(r.num(1), 1, "the allocation's device, not the current one");
    assert_eq!(r.num(2), p + 100, "devicePointer keeps the offset");
    assert_eq!((r.num(3), r.num(4), r.num(5)), (0, 0, 0));

    // hipHostMalloc memory: host type, both pointers, the flags.
    let hp = a
        .ok(&format!("hostmalloc 5000 {hipHostMallocMapped}"))
        .num(0);
    let r = a.ok(&format!("attrs {}", hexptr(hp + 8)));
    assert_eq!(
        r.num(0) as i64,
        host,
        "{version}: type of hipHostMalloc memory"
    );
    assert_eq!((r.num(2), r.num(3)), (hp + 8, hp + 8));
    assert_eq!(r.num(5), u64::from(hipHostMallocMapped));

    // An IPC mapping, opened on device 1 of another process: device memory of that device.
    let h = a.ok(&format!("export {}", hexptr(p))).val(0).to_owned();
    b.ok("setdev 1");
    let q = b.ok(&format!("open {h} {}", lazy(version))).num(0);
    let r = b.ok(&format!("attrs {}", hexptr(q)));
    assert_eq!((r.num(0) as i64, r.num(1), r.num(2)), (device, 1, q));
    // Two opens, one close: still mapped (hip-tests Unit_hipIpcCloseMemHandle_Positive_
    // Reference_Counting); after the last close the pointer is unknown.
    assert_eq!(b.ok(&format!("open {h} {}", lazy(version))).num(0), q);
    b.ok(&format!("close {}", hexptr(q)));
    b.ok(&format!("attrs {}", hexptr(q)));
    b.ok(&format!("close {}", hexptr(q)));
    let unknown_checks = |hip: &mut Hip, what: u64| {
        if pointer_attributes_v6(version) {
            let r = hip.ok(&format!("attrs {}", hexptr(what)));
            assert_eq!(
                r.num(0) as i64,
                mem_type(MemoryKind::Unregistered, version),
                "6.x: unregistered"
            );
            assert_eq!(r.val(1), "-1", "hipInvalidDeviceId");
            assert_eq!((r.num(2), r.num(3)), (0, 0));
        } else {
            hip.expect_code(&format!("attrs {}", hexptr(what)), hipErrorInvalidValue);
        }
    };
    unknown_checks(&mut b, q);
    // Plain host memory and NULL.
    let plain = a.ok("hostbuf 64").num(0);
    unknown_checks(&mut a, plain);
    unknown_checks(&mut a, 0);
    // NULL attributes.
    a.expect_code(&format!("attrs_null {}", hexptr(p)), hipErrorInvalidValue);

    a.ok(&format!("hostfree {}", hexptr(hp)));
    unknown_checks(&mut a, hp);
    a.ok(&format!("free {}", hexptr(p)));
    a.exit();
    b.exit();
    root.assert_clean();
}

#[test]
fn pointer_attributes_6x() {
    pointer_attributes("6.2");
}

#[test]
fn pointer_attributes_5x() {
    pointer_attributes("5.2");
}

fn host_memory(version: &str) {
    let root = TestRoot::new(&format!("host-{version}"));
    let mut a = Hip::spawn("a", &root, version, &[]);
    // Flags: unknown bits and Coherent | NonCoherent are refused; size 0 is NULL.
    a.expect_code("hostmalloc 4096 8", hipErrorInvalidValue);
    a.expect_code(
        &format!(
            "hostmalloc 4096 {}",
            hipHostMallocCoherent | hipHostMallocNonCoherent
        ),
        hipErrorInvalidValue,
    );
    a.expect_code("hostmalloc_null 4096", hipErrorInvalidValue);
    assert_eq!(a.ok("hostmalloc 0 0").num(0), 0);
    let hp = a
        .ok(&format!(
            "hostmalloc 10000 {}",
            hipHostMallocPortable | hipHostMallocCoherent
        ))
        .num(0);
    assert_eq!(hp % 4096, 0, "page aligned");
    assert_ne!(
        a.ok(&format!("hostcheck {} 10000 4", hexptr(hp))).val(0),
        "same",
        "fresh memory does not hold the pattern yet"
    );
    // Host memory is an operand of any copy kind, both ways, and has an address range.
    let d = a.ok("malloc 10000").num(0);
    a.ok(&format!("hostwrite {} 10000 4", hexptr(hp)));
    a.ok(&format!(
        "memcpy {} {} 10000 {hipMemcpyHostToDevice}",
        hexptr(d),
        hexptr(hp)
    ));
    assert_eq!(a.ok(&format!("check {} 10000 4", hexptr(d))).val(0), "same");
    a.ok(&format!("fill {} 10000 5", hexptr(d)));
    a.ok(&format!(
        "memcpy {} {} 10000 {hipMemcpyDeviceToDevice}",
        hexptr(hp),
        hexptr(d)
    ));
    assert_eq!(
        a.ok(&format!("hostcheck {} 10000 5", hexptr(hp))).val(0),
        "same"
    );
    let r = a.ok(&format!("range {}", hexptr(hp + 9999)));
    assert_eq!((r.num(0), r.num(1)), (hp, 10000));
    // A copy past its end is refused.
    a.expect_code(
        &format!(
            "memcpy {} {} 10000 {hipMemcpyDeviceToDevice}",
            hexptr(hp + 1),
            hexptr(d)
        ),
        hipErrorInvalidValue,
    );
    // Not exportable: refused with the version's hipIpcGetMemHandle code.
    let no_export = if clr_ipc_checks(version) {
        hipErrorInvalidValue
    } else {
        hipErrorInvalidDevicePointer
    };
    a.expect_code(&format!("export {}", hexptr(hp)), no_export);
    // hipHostFree: interior pointer, device memory and unknown pointers are refused.
    a.expect_code(
        &format!("hostfree {}", hexptr(hp + 64)),
        hipErrorInvalidValue,
    );
    a.expect_code(&format!("hostfree {}", hexptr(d)), hipErrorInvalidValue);
    a.ok("hostfree 0x0");
    a.ok(&format!("hostfree {}", hexptr(hp)));
    a.expect_code(&format!("hostfree {}", hexptr(hp)), hipErrorInvalidValue);
    a.ok(&format!("free {}", hexptr(d)));
    a.exit();
    root.assert_clean();
}

#[test]
fn host_memory_6x() {
    host_memory("6.2");
}

#[test]
fn host_memory_5x() {
    host_memory("5.2");
}

fn memcpy_async_on_an_import(version: &str) {
    let root = TestRoot::new(&format!("async-{version}"));
    let mut a = Hip::spawn("exporter", &root, version, &[]);
    let mut b = Hip::spawn("importer", &root, version, &[]);
    let p = a.ok("malloc 65536").num(0);
    a.ok(&format!("fill {} 65536 7", hexptr(p)));
    let h = a.ok(&format!("export {}", hexptr(p))).val(0).to_owned();
    let q = b.ok(&format!("open {h} {}", lazy(version))).num(0);

    // Device to host on the null stream: done when the call returns (nothing pending).
    let buf = b.ok("hostbuf 65536").num(0);
    b.ok(&format!(
        "memcpy_async {} {} 65536 {hipMemcpyDeviceToHost} 0x0",
        hexptr(buf),
        hexptr(q)
    ));
    b.ok("stream_sync 0x0");
    assert_eq!(
        b.ok(&format!("hostcheck {} 65536 7", hexptr(buf))).val(0),
        "same"
    );

    // Host to device into the import on a held stream: the exporter sees the bytes only
    // once the stream runs the copy.
    let s = b.ok("stream_create").num(0);
    b.ok(&format!("hold {}", hexptr(s)));
    b.ok(&format!("hostwrite {} 4096 8", hexptr(buf)));
    b.ok(&format!(
        "memcpy_async {} {} 4096 {hipMemcpyHostToDevice} {}",
        hexptr(q + 4096),
        hexptr(buf),
        hexptr(s)
    ));
    assert_eq!(
        a.ok(&format!("check {} 4096 7", hexptr(p))).val(0),
        "same",
        "bytes before the copy's range are untouched"
    );
    let before = a.ok(&format!("check {} 4096 8", hexptr(p + 4096)));
    assert_ne!(before.val(0), "same", "the held stream has not copied yet");
    b.ok(&format!("release {}", hexptr(s)));
    b.ok(&format!("stream_sync {}", hexptr(s)));
    assert_eq!(
        a.ok(&format!("check {} 4096 8", hexptr(p + 4096))).val(0),
        "same"
    );

    // Device to device between the import and the importer's own memory.
    let own = b.ok("malloc 4096").num(0);
    b.ok(&format!(
        "memcpy_async {} {} 4096 {hipMemcpyDefault} {}",
        hexptr(own),
        hexptr(q + 4096),
        hexptr(s)
    ));
    assert_eq!(
        b.ok(&format!("check {} 4096 8", hexptr(own))).val(0),
        "same"
    );

    // Refusals: validated at the call, even on a held stream.
    b.ok(&format!("hold {}", hexptr(s)));
    b.expect_code(
        &format!(
            "memcpy_async {} {} 4096 {hipMemcpyHostToDevice} {}",
            hexptr(q + 65536 - 100),
            hexptr(buf),
            hexptr(s)
        ),
        hipErrorInvalidValue,
    );
    b.expect_code(
        &format!(
            "memcpy_async {} {} 16 77 {}",
            hexptr(q),
            hexptr(buf),
            hexptr(s)
        ),
        hipErrorInvalidMemcpyDirection,
    );
    b.expect_code(
        &format!(
            "memcpy_async {} {} 16 {hipMemcpyHostToDevice} 0x1234",
            hexptr(q),
            hexptr(buf)
        ),
        hipErrorInvalidHandle,
    );
    b.ok(&format!("release {}", hexptr(s)));
    // A queued copy into the import: the close first waits for the device's pending
    // stream work (CLR's null-stream finish), so the copy runs before the mapping goes.
    b.ok(&format!("hold {}", hexptr(s)));
    b.ok(&format!("hostwrite {} 64 9", hexptr(buf)));
    b.ok(&format!(
        "memcpy_async {} {} 64 {hipMemcpyHostToDevice} {}",
        hexptr(q),
        hexptr(buf),
        hexptr(s)
    ));
    b.bg("close", &format!("close {}", hexptr(q)));
    assert!(
        !b.bg_done("close"),
        "the close did not wait for the held stream"
    );
    b.ok(&format!("release {}", hexptr(s)));
    assert_eq!(b.bg_result("close").code, hipSuccess);
    assert_eq!(a.ok(&format!("check {} 64 9", hexptr(p))).val(0), "same");

    b.ok(&format!("stream_destroy {}", hexptr(s)));
    b.ok(&format!("free {}", hexptr(own)));
    a.ok(&format!("free {}", hexptr(p)));
    a.exit();
    b.exit();
    root.assert_clean();
}

#[test]
fn memcpy_async_on_an_import_6x() {
    memcpy_async_on_an_import("6.2");
}

#[test]
fn memcpy_async_on_an_import_5x() {
    memcpy_async_on_an_import("5.2");
}

fn event_timing(version: &str) {
    let root = TestRoot::new(&format!("timing-{version}"));
    let mut a = Hip::spawn("a", &root, version, &[]);
    let start = a.ok("event_create0").num(0);
    let stop = a.ok("event_create0").num(0);
    a.expect_code("event_create0_null", hipErrorInvalidValue);
    let (st, sp) = (hexptr(start), hexptr(stop));
    // Never recorded: no time.
    a.expect_code(&format!("elapsed {st} {sp}"), hipErrorInvalidHandle);
    a.ok(&format!("record {st} 0x0"));
    a.expect_code(&format!("elapsed {st} {sp}"), hipErrorInvalidHandle);
    a.ok("sleep_ms 30");
    a.ok(&format!("record {sp} 0x0"));
    let ms: f32 = a.ok(&format!("elapsed {st} {sp}")).val(0).parse().unwrap();
    assert!((25.0..10_000.0).contains(&ms), "{ms} ms for a 30 ms sleep");
    let back: f32 = a.ok(&format!("elapsed {sp} {st}")).val(0).parse().unwrap();
    assert!((back + ms).abs() < 0.01, "{back} vs {ms}");
    let same: f32 = a.ok(&format!("elapsed {st} {st}")).val(0).parse().unwrap();
    assert_eq!(same, 0.0);
    // NULL arguments.
    a.expect_code(&format!("elapsed_null {st} {sp}"), hipErrorInvalidValue);
    a.expect_code(&format!("elapsed 0x0 {sp}"), hipErrorInvalidHandle);
    a.expect_code(&format!("elapsed {st} 0x1234"), hipErrorInvalidHandle);
    // Timing disabled.
    let quiet = a
        .ok(&format!("event_create {hipEventDisableTiming}"))
        .num(0);
    a.ok(&format!("record {} 0x0", hexptr(quiet)));
    a.expect_code(
        &format!("elapsed {st} {}", hexptr(quiet)),
        hipErrorInvalidHandle,
    );
    // A record pending on a held stream: not ready (a status, like hipEventQuery's).
    let s = a.ok("stream_create").num(0);
    a.ok(&format!("hold {}", hexptr(s)));
    a.ok(&format!("record {sp} {}", hexptr(s)));
    a.expect_code(&format!("elapsed {st} {sp}"), hipErrorNotReady);
    a.ok(&format!("release {}", hexptr(s)));
    a.ok(&format!("elapsed {st} {sp}"));
    for e in [start, stop, quiet] {
        a.ok(&format!("event_destroy {}", hexptr(e)));
    }
    a.ok(&format!("stream_destroy {}", hexptr(s)));
    a.exit();
    root.assert_clean();
}

#[test]
fn event_timing_6x() {
    event_timing("6.2");
}

#[test]
fn event_timing_5x() {
    event_timing("5.2");
}

fn contexts(version: &str) {
    let root = TestRoot::new(&format!("ctx-{version}"));
    let mut a = Hip::spawn("a", &root, version, &[("DEVIPC_EMU_DEVICES", "2")]);
    let c1 = a.ok("ctx_create 0 1").num(0);
    assert_ne!(c1, 0);
    assert_eq!(a.ok("getdev").num(0), 1, "the new context is current");
    let c0 = a.ok("ctx_create 0 0").num(0);
    assert_ne!(c0, c1);
    assert_eq!(a.ok("getdev").num(0), 0);
    assert_eq!(
        a.ok("ctx_create 0 1").num(0),
        c1,
        "one primary context per device"
    );
    // CLR: a device out of range is hipErrorInvalidValue, not hipErrorInvalidDevice.
    a.expect_code("ctx_create 0 2", hipErrorInvalidValue);
    a.expect_code("ctx_create 0 -1", hipErrorInvalidValue);
    a.expect_code("ctx_create_null 0", hipErrorInvalidValue);
    a.exit();
    root.assert_clean();
}

#[test]
fn contexts_6x() {
    contexts("6.2");
}

#[test]
fn contexts_5x() {
    contexts("5.2");
}

#[test]
fn get_proc_address_exists_from_6_2() {
    for (version, exists) in [("6.2", true), ("6.1", false), ("5.2", false)] {
        let root = TestRoot::new(&format!("proc-{version}"));
        let mut a = Hip::spawn("a", &root, version, &[]);
        let present = a.ok("procaddr_present");
        assert_eq!(
            present.val(0),
            if exists { "yes" } else { "no" },
            "{version}"
        );
        if !exists {
            a.expect_code("procaddr hipMalloc", hipErrorNotSupported);
            a.exit();
            continue;
        }
        let r = a.ok("procaddr hipMalloc");
        assert_eq!(r.num(0), u64::from(HIP_GET_PROC_ADDRESS_SUCCESS as u32));
        assert_ne!(r.num(1), 0);
        // The pointer is the working function: hipRuntimeGetVersion through it.
        assert_eq!(a.ok("procaddr_call_version").num(0), 60_200_000);
        // Every function of the list resolves, the optional one included.
        for name in HipApi::REQUIRED_SYMBOLS
            .iter()
            .chain(HipApi::OPTIONAL_SYMBOLS)
        {
            assert_ne!(a.ok(&format!("procaddr {name}")).num(1), 0, "{name}");
        }
        let r = a.expect_code("procaddr hipNoSuchFunction", hipErrorInvalidValue);
        assert_eq!(
            r.num(0),
            u64::from(HIP_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND as u32)
        );
        assert_eq!(r.num(1), 0);
        a.expect_code("procaddr -", hipErrorInvalidValue);
        a.exit();
        root.assert_clean();
    }
}
