//! Issue 16, HIP: one physical device seen under different ordinals by two real processes
//! with different visibility masks (`HIP_VISIBLE_DEVICES`, `ROCR_VISIBLE_DEVICES`,
//! `CUDA_VISIBLE_DEVICES`), its identity (PCI bus id, UUID) equal in both, IPC memory
//! recorded on the physical device, indices outside a mask refused, malformed masks read
//! as ROCr and CLR read them.
//!
//! The shell commands (`id_*`) are executed by [`execute`], reached from the HIP shell of
//! `hip_support`.

use std::ffi::{CStr, c_char, c_int};

use crate::hip_support::*;
use devipc_emulator::hip::rules::*;
use devipc_emulator::machine::{hip_uuid_bytes, hip_uuid_string};
use devipc_hip_sys::*;

/// Entry point of the child processes (a no-op in the parent run).
#[test]
fn child_role() {
    child_main();
}

/// The identity rules, for `hip_break_rules::every_rule_has_a_break_scenario`: each has a
/// violation and a broken run below.
pub const COVERED: &[&str] = &[
    DEVICE_VISIBILITY_MASKS_APPLIED,
    DEVICE_PCI_BUS_ID_LEN_CHECKED,
    DEVICE_BY_PCI_BUS_ID_VISIBLE_ONLY,
];

// ---------------------------------------------------------------------------------------
// Child side: the `id_*` shell commands.

/// Whether `cmd` is one of this module's shell commands.
pub fn is_command(cmd: &str) -> bool {
    cmd.starts_with("id_")
}

/// Runs one `id_*` command; returns `<code> <values...>`.
pub fn execute(words: &[&str]) -> String {
    let api = devipc_emulator::hip_api();
    let int = |i: usize| -> c_int {
        words
            .get(i)
            .and_then(|w| parse_num(w))
            .map_or(0, |v| v as i64 as c_int)
    };
    match words.first().copied().unwrap_or("") {
        // id_pci <device> [len]: code and the text written (`-` for none).
        "id_pci" => {
            let len = if words.len() > 2 { int(2) } else { 64 };
            let mut buf = [0x7f as c_char; 64];
            // SAFETY: a 64-byte buffer; len is at most 64 in the tests.
            let c = unsafe { (api.hipDeviceGetPCIBusId)(buf.as_mut_ptr(), len, int(1)) };
            let text = if buf[0] == 0x7f {
                "-".to_owned()
            } else {
                // SAFETY: the emulator wrote a NUL within the buffer.
                unsafe { CStr::from_ptr(buf.as_ptr()) }
                    .to_string_lossy()
                    .into_owned()
            };
            format!("{c} {text}")
        }
        "id_pci_null" => {
            // SAFETY: a NULL buffer, which the emulator must refuse.
            let c = unsafe { (api.hipDeviceGetPCIBusId)(std::ptr::null_mut(), 13, int(1)) };
            format!("{c}")
        }
        // id_bypci <text>: code and the ordinal written (-9 when untouched).
        "id_bypci" => {
            let text = std::ffi::CString::new(words.get(1).copied().unwrap_or("")).unwrap();
            let mut d: c_int = -9;
            // SAFETY: a valid out-pointer and a NUL-terminated string.
            let c = unsafe { (api.hipDeviceGetByPCIBusId)(&mut d, text.as_ptr()) };
            format!("{c} {d}")
        }
        "id_bypci_null" => {
            let mut d: c_int = -9;
            // SAFETY: NULL arguments, which the emulator must refuse.
            let a = unsafe { (api.hipDeviceGetByPCIBusId)(&mut d, std::ptr::null()) };
            // SAFETY: as above.
            let b =
                unsafe { (api.hipDeviceGetByPCIBusId)(std::ptr::null_mut(), c"0:10:0".as_ptr()) };
            format!("{a} {b}")
        }
        // id_uuid <device>: code and the 16 bytes as text.
        "id_uuid" => {
            let f = api.hipDeviceGetUuid.expect("hipDeviceGetUuid in the table");
            let mut u = hipUUID::default();
            // SAFETY: a valid out-pointer.
            let c = unsafe { f(&mut u, int(1)) };
            let text: String = u.bytes.iter().map(|b| *b as u8 as char).collect();
            format!("{c} {}", if c == 0 { text } else { "-".into() })
        }
        "id_uuid_null" => {
            let f = api.hipDeviceGetUuid.expect("hipDeviceGetUuid in the table");
            // SAFETY: a NULL pointer, which the emulator must refuse.
            format!("{}", unsafe { f(std::ptr::null_mut(), int(1)) })
        }
        "id_uuid_present" => format!("0 {}", api.hipDeviceGetUuid.is_some() as u8),
        other => panic!("unknown identity command {other}"),
    }
}

// ---------------------------------------------------------------------------------------
// Parent side.

/// The bus id of physical device `p`, as CLR prints it.
fn bus(p: u32) -> String {
    format!("0000:{:02x}:00.0", 0x10 + p)
}

/// A HIP shell on a 4-device machine with the visibility variables `vars`.
fn spawn(name: &str, root: &TestRoot, version: &str, vars: &[(&str, &str)]) -> Hip {
    let mut env = vec![("DEVIPC_EMU_DEVICES", "4")];
    env.extend_from_slice(vars);
    Hip::spawn(name, root, version, &env)
}

/// Producer sees physical {2,3} as {0,1}, consumer {3,2} as {0,1}, through `var`; the
/// identities of producer device 1 are those of consumer device 0, the consumer finds it
/// by bus id, and memory allocated on producer device 1, exported and opened by the
/// consumer, is physical device 3's with the same bytes.
fn one_device_two_ordinals(var: &str, producer_mask: &str, consumer_mask: &str) {
    let root = TestRoot::new(&format!("hip-visibility-{var}"));
    let mut a = spawn("producer", &root, "6.2", &[(var, producer_mask)]);
    let mut b = spawn("consumer", &root, "6.2", &[(var, consumer_mask)]);
    for h in [&mut a, &mut b] {
        assert_eq!(h.ok("count").num(0), 2, "{var}");
    }
    // Identity: producer 1 = consumer 0 = physical 3; producer 0 = consumer 1 = physical 2.
    assert_eq!(a.ok("id_pci 1").val(0), bus(3));
    assert_eq!(b.ok("id_pci 0").val(0), bus(3));
    assert_eq!(a.ok("id_pci 0").val(0), bus(2));
    assert_eq!(b.ok("id_pci 1").val(0), bus(2));
    let uuid = String::from_utf8(hip_uuid_bytes(3).to_vec()).unwrap();
    assert_eq!(a.ok("id_uuid 1").val(0), uuid);
    assert_eq!(b.ok("id_uuid 0").val(0), uuid);
    assert_ne!(a.ok("id_uuid 0").val(0), uuid);
    assert_eq!(b.ok(&format!("id_bypci {}", bus(3))).num(0), 0);
    assert_eq!(a.ok(&format!("id_bypci {}", bus(3))).num(0), 1);

    // Memory on producer device 1 is physical device 3's, opened by the consumer on its
    // device 0 (the same physical device).
    a.ok("setdev 1");
    assert_eq!(a.ok("getdev").num(0), 1);
    let p = a.ok("malloc 65536").num(0);
    a.ok(&format!("fill {} 65536 29", hexptr(p)));
    let attrs = a.ok(&format!("attrs {}", hexptr(p)));
    assert_eq!(
        attrs.val(1),
        "1",
        "the producer's pointer is on its device 1"
    );
    let handle = a.ok(&format!("export {}", hexptr(p))).val(0).to_owned();
    assert_eq!(
        root.meta(&handle).info().device,
        3,
        "recorded on physical 3"
    );
    b.ok("setdev 0");
    let q = b.ok(&format!("open {handle} {}", lazy("6.2"))).num(0);
    assert_eq!(
        b.ok(&format!("check {} 65536 29", hexptr(q))).val(0),
        "same"
    );
    assert_eq!(
        b.ok(&format!("attrs {}", hexptr(q))).val(1),
        "0",
        "the importer's device"
    );

    // Outside the mask: the ordinals stop at 2.
    for h in [&mut a, &mut b] {
        h.expect_code("setdev 2", hipErrorInvalidDevice);
        h.expect_code("id_pci 2", hipErrorInvalidDevice);
        h.expect_code("id_uuid 2", hipErrorInvalidDevice);
        h.expect_code("can_peer 0 2", hipErrorInvalidDevice);
        // Physical devices 0 and 1 exist, but not for these processes.
        h.expect_rule(
            &format!("id_bypci {}", bus(0)),
            hipErrorInvalidValue,
            DEVICE_BY_PCI_BUS_ID_VISIBLE_ONLY,
        );
    }
    assert_eq!(a.ok("can_peer 0 1").num(0), 1);

    b.ok(&format!("close {}", hexptr(q)));
    a.ok(&format!("free {}", hexptr(p)));
    a.exit();
    b.exit();
    root.assert_clean();
}

#[test]
fn hip_visible_devices_give_one_device_two_ordinals() {
    one_device_two_ordinals("HIP_VISIBLE_DEVICES", "2,3", "3,2");
}

#[test]
fn rocr_visible_devices_give_one_device_two_ordinals() {
    one_device_two_ordinals("ROCR_VISIBLE_DEVICES", "2,3", "3,2");
}

#[test]
fn cuda_visible_devices_give_one_device_two_ordinals() {
    one_device_two_ordinals("CUDA_VISIBLE_DEVICES", "2,3", "3,2");
}

#[test]
fn uuid_masks_select_the_same_devices() {
    // ROCr by a unique UUID prefix (any case), CLR by a substring of the agent string.
    let root = TestRoot::new("hip-visibility-uuid");
    let rocr = format!(
        "{},{}",
        hip_uuid_string(2).to_ascii_uppercase(),
        &hip_uuid_string(3)[..12]
    );
    let hip = format!("{},{}", hip_uuid_string(3), hip_uuid_string(2));
    let mut a = spawn(
        "rocr-uuid",
        &root,
        "6.2",
        &[("ROCR_VISIBLE_DEVICES", &rocr)],
    );
    let mut b = spawn("hip-uuid", &root, "6.2", &[("HIP_VISIBLE_DEVICES", &hip)]);
    assert_eq!(a.ok("count").num(0), 2);
    assert_eq!(a.ok("id_pci 1").val(0), bus(3));
    assert_eq!(b.ok("count").num(0), 2);
    assert_eq!(b.ok("id_pci 0").val(0), bus(3));
    // The 5.x line of CLR reads no UUID entries: the list ends at once.
    let mut c = spawn(
        "hip-uuid-5.2",
        &root,
        "5.2",
        &[("HIP_VISIBLE_DEVICES", &hip)],
    );
    let r = c.run("count");
    assert_eq!((r.code, r.num(0)), (hipErrorNoDevice, 0));
    for h in [a, b, c] {
        h.exit();
    }
    root.assert_clean();
}

#[test]
fn hip_masks_index_what_rocr_left() {
    let root = TestRoot::new("hip-visibility-stack");
    let mut a = spawn(
        "stacked",
        &root,
        "6.2",
        &[
            ("ROCR_VISIBLE_DEVICES", "1,2,3"),
            ("HIP_VISIBLE_DEVICES", "2,1"),
        ],
    );
    assert_eq!(a.ok("count").num(0), 2);
    assert_eq!(a.ok("id_pci 0").val(0), bus(3));
    assert_eq!(a.ok("id_pci 1").val(0), bus(2));
    // HIP's list wins over CUDA's; CUDA's counts when HIP's is empty.
    let mut b = spawn(
        "cuda",
        &root,
        "6.2",
        &[("HIP_VISIBLE_DEVICES", ""), ("CUDA_VISIBLE_DEVICES", "1")],
    );
    assert_eq!(b.ok("count").num(0), 1);
    assert_eq!(b.ok("id_pci 0").val(0), bus(1));
    a.exit();
    b.exit();
    root.assert_clean();
}

#[test]
fn malformed_masks_read_as_the_runtimes_read_them() {
    let root = TestRoot::new("hip-visibility-malformed");
    // (variable, value, physical devices seen)
    let cases: &[(&str, &str, &[u32])] = &[
        ("HIP_VISIBLE_DEVICES", "1,7,0", &[1]),
        ("HIP_VISIBLE_DEVICES", "3,3,1", &[3, 1]),
        ("HIP_VISIBLE_DEVICES", "01", &[]),
        ("HIP_VISIBLE_DEVICES", " 1", &[]),
        ("ROCR_VISIBLE_DEVICES", "", &[]),
        ("ROCR_VISIBLE_DEVICES", "0x2,1,1,0", &[2, 1]),
        ("ROCR_VISIBLE_DEVICES", "GPU-XX", &[]),
    ];
    for (i, (var, value, want)) in cases.iter().enumerate() {
        let mut h = spawn(&format!("case{i}"), &root, "6.2", &[(var, value)]);
        let r = h.run("count");
        assert_eq!(r.num(0), want.len() as u64, "{var}={value:?}");
        if want.is_empty() {
            assert_eq!(r.code, hipErrorNoDevice, "{var}={value:?}");
            h.expect_code("init 0", hipErrorInvalidDevice);
            h.expect_code("setdev 0", hipErrorInvalidDevice);
            h.expect_code("id_pci 0", hipErrorNoDevice);
            h.expect_code("malloc 64", hipErrorInvalidDevice);
        }
        for (ordinal, p) in want.iter().enumerate() {
            assert_eq!(
                h.ok(&format!("id_pci {ordinal}")).val(0),
                bus(*p),
                "{var}={value:?}"
            );
        }
        h.exit();
    }
    root.assert_clean();
}

#[test]
fn identity_calls_check_their_arguments_as_clr() {
    let root = TestRoot::new("hip-identity-args");
    let mut h = spawn("args", &root, "6.2", &[]);
    assert_eq!(h.ok("id_pci 0 13").val(0), bus(0));
    // 12 bytes or less: the truncated text and hipErrorInvalidValue.
    let r = h.run("id_pci 0 12");
    assert_eq!((r.code, r.val(0)), (hipErrorInvalidValue, "0000:10:00."));
    h.expect_rule(
        "id_pci 0 5",
        hipErrorInvalidValue,
        DEVICE_PCI_BUS_ID_LEN_CHECKED,
    );
    let r = h.run("id_pci 0 0");
    assert_eq!((r.code, r.val(0)), (hipErrorInvalidValue, "-"));
    h.expect_code("id_pci 4", hipErrorInvalidDevice);
    h.expect_code("id_pci -1", hipErrorInvalidDevice);
    // The device is checked before the buffer.
    h.expect_code("id_pci_null 9", hipErrorInvalidDevice);
    h.expect_code("id_pci_null 0", hipErrorInvalidValue);
    // The forms sscanf("%04x:%02x:%02x") accepts.
    for text in [
        "0000:11:00.0",
        "0:11:0",
        "0000:11:00",
        "0000:11:00.5",
        "0x0:11:00",
    ] {
        assert_eq!(h.ok(&format!("id_bypci {text}")).num(0), 1, "{text}");
    }
    for text in ["11:00.0", "0000-11-00.0", "nothing", "0000:20:00.0"] {
        let r = h.run(&format!("id_bypci {text}"));
        assert_eq!(
            (r.code, r.num(0) as i64),
            (hipErrorInvalidValue, -9),
            "{text}"
        );
    }
    let r = h.run("id_bypci_null");
    assert_eq!(
        (r.code, r.num(0) as i32),
        (hipErrorInvalidValue, hipErrorInvalidValue)
    );
    h.expect_code("id_uuid 4", hipErrorInvalidDevice);
    h.expect_code("id_uuid_null 4", hipErrorInvalidDevice);
    h.expect_code("id_uuid_null 0", hipErrorInvalidValue);
    h.exit();
    // hipDeviceGetUuid is @@hip_5.1: absent from the table before.
    let mut old = spawn("old", &root, "5.0", &[]);
    assert_eq!(old.ok("id_uuid_present").val(0), "0");
    old.exit();
    root.assert_clean();
}

#[test]
fn vmm_allocations_are_located_by_ordinal() {
    if !crate::hip_vmm::pidfd_between_children("vmm_allocations_are_located_by_ordinal") {
        return;
    }
    let size = 2u64 << 20;
    let root = TestRoot::new("hip-visibility-vmm");
    let mut a = spawn("producer", &root, "6.2", &[("HIP_VISIBLE_DEVICES", "2,3")]);
    let mut b = spawn("consumer", &root, "6.2", &[("HIP_VISIBLE_DEVICES", "3,2")]);
    let mut c = spawn("hidden", &root, "6.2", &[("HIP_VISIBLE_DEVICES", "0")]);
    // Producer device 1 = physical 3.
    let h = a
        .ok(&format!(
            "vcreate {size} {hipMemHandleTypePosixFileDescriptor} {hipMemAllocationTypePinned} 1"
        ))
        .val(0)
        .to_owned();
    assert_eq!(a.ok(&format!("vprop {h}")).num(3), 1);
    let va = a.ok(&format!("vreserve {size}")).val(0).to_owned();
    a.ok(&format!("vmap {va} {size} {h}"));
    a.ok(&format!(
        "vaccess {va} {size} 1 {hipMemAccessFlagsProtReadWrite}"
    ));
    a.expect_code(
        &format!("vaccess {va} {size} 2 {hipMemAccessFlagsProtReadWrite}"),
        hipErrorInvalidValue,
    );
    a.ok("setdev 1");
    a.ok(&format!("fill {va} 4096 5"));
    let (bh, bva) = crate::hip_vmm::share(&mut a, &mut b, &h, "6.2");
    // The consumer's ordinal of physical 3 is 0.
    assert_eq!(b.ok(&format!("vprop {bh}")).num(3), 0);
    b.ok(&format!(
        "vaccess {bva} {size} 0 {hipMemAccessFlagsProtReadWrite}"
    ));
    b.ok("setdev 0");
    assert_eq!(b.ok(&format!("check {bva} 4096 5")).val(0), "same");
    assert_eq!(b.ok(&format!("attrs {bva}")).val(1), "0");
    // A process whose mask hides physical 3 reports no ordinal for it.
    let (ch, cva) = crate::hip_vmm::share(&mut a, &mut c, &h, "6.2");
    assert_eq!(
        c.ok(&format!("vprop {ch}")).num(3) as i64 as i32,
        hipInvalidDeviceId
    );
    assert_eq!(
        c.ok(&format!("attrs {cva}")).num(1) as i64 as i32,
        hipInvalidDeviceId
    );
    for (h2, hh, vv) in [(&mut b, &bh, &bva), (&mut c, &ch, &cva)] {
        h2.ok(&format!("vunmap {vv} {size}"));
        h2.ok(&format!("vrelease {hh}"));
        h2.ok(&format!("vfree {vv} {size}"));
    }
    a.ok(&format!("vunmap {va} {size}"));
    a.ok(&format!("vrelease {h}"));
    a.ok(&format!("vfree {va} {size}"));
    for h in [a, b, c] {
        h.exit();
    }
    root.assert_clean();
}

// ---------------------------------------------------------------------------------------
// The rules switched off (`DEVIPC_EMU_BREAK_RULE`): what a runtime without them would do.

#[test]
fn identity_rules_switched_off() {
    let root = TestRoot::new("hip-visibility-broken");
    let broken = |name: &str, rule: &str, mask: &str| {
        spawn(
            name,
            &root,
            "6.2",
            &[
                ("DEVIPC_EMU_BREAK_RULE", rule),
                ("HIP_VISIBLE_DEVICES", mask),
            ],
        )
    };
    // Masks ignored: every physical device, ordinal = physical id.
    let mut h = broken("masks", DEVICE_VISIBILITY_MASKS_APPLIED, "3");
    assert_eq!(h.ok("count").num(0), 4);
    assert_eq!(h.ok("id_pci 0").val(0), bus(0));
    h.exit();
    // A short buffer succeeds with the truncated text.
    let mut h = broken("len", DEVICE_PCI_BUS_ID_LEN_CHECKED, "0");
    let r = h.run("id_pci 0 12");
    assert_eq!((r.code, r.val(0)), (hipSuccess, "0000:10:00."));
    h.exit();
    // A hidden device's bus id answers its physical id.
    let mut h = broken("bypci", DEVICE_BY_PCI_BUS_ID_VISIBLE_ONLY, "3");
    assert_eq!(h.ok(&format!("id_bypci {}", bus(2))).num(0), 2);
    assert_eq!(h.ok(&format!("id_bypci {}", bus(3))).num(0), 0);
    h.exit();
    root.assert_clean();
}

#[test]
fn peers_and_contexts_follow_the_physical_devices() {
    // DEVIPC_EMU_PEERS names physical devices: 2 and 3 are linked, 1 and 2 are not.
    let root = TestRoot::new("hip-visibility-peers");
    let peers = ("DEVIPC_EMU_PEERS", "2-3");
    let mut a = spawn(
        "linked",
        &root,
        "6.2",
        &[("HIP_VISIBLE_DEVICES", "3,2"), peers],
    );
    let mut b = spawn(
        "unlinked",
        &root,
        "6.2",
        &[("HIP_VISIBLE_DEVICES", "1,2"), peers],
    );
    assert_eq!(a.ok("can_peer 0 1").num(0), 1);
    assert_eq!(b.ok("can_peer 0 1").num(0), 0);
    a.ok("enable_peer 1 0");
    b.expect_rule(
        "enable_peer 1 0",
        hipErrorPeerAccessUnsupported,
        PEER_TOPOLOGY_RESPECTED,
    );
    // hipCtxCreate takes the ordinal (CLR: out of range is hipErrorInvalidValue) and makes
    // it current; two processes' contexts of one physical device are that device's.
    let ctx = a.ok("ctx_create 0 1").num(0);
    assert_eq!(a.ok("getdev").num(0), 1);
    assert_eq!(a.ok("id_pci 1").val(0), bus(2));
    a.expect_code("ctx_create 0 2", hipErrorInvalidValue);
    assert_ne!(ctx, 0);
    a.exit();
    b.exit();
    root.assert_clean();
}
