//! ACL surface, per process: init counting, devices and contexts, peer access, NULL
//! checks, `aclrtMalloc` memory and copies, streams, the shared memory limit, versions,
//! `aclGetRecentErrMsg`, and the rule switch. Every call goes through the C ABI in a real
//! child process (see `acl_support`); every test has its own state directory and checks
//! that it is clean at the end.

use crate::acl_support::{AclRoot, EmuRoot, NULL_CASES, TestRoot};
use crate::emu_support::{break_rule_config_error, unswitchable_refusal};
use devipc_emulator::acl::rules;

/// Entry point of the child processes; a no-op in the parent run.
#[test]
fn child_role() {
    crate::acl_support::child_main();
}

#[test]
fn init_and_finalize_are_reference_counted() {
    let root = TestRoot::new("init");
    let mut a = root.spawn("a", &[]);
    a.ok("init");
    a.fails("init", 100002, rules::INIT_REPEAT);
    a.fails("init", 100002, rules::INIT_REPEAT);
    a.ok("finalize");
    a.ok("finalize");
    a.ok("finalize");
    a.fails("finalize", 100037, rules::FINALIZE_REPEAT);
    // A configuration file must exist (its content is not interpreted).
    let missing = root.path().join("missing.json");
    let f = a.fail(&format!("init {}", missing.display()));
    assert_eq!(f.code, 100003, "{}", f.message);
    let cfg = root.path().join("acl.json");
    std::fs::write(&cfg, "{}").unwrap();
    a.ok(&format!("init {}", cfg.display()));
    a.ok("finalize");
    a.exit();
    root.assert_clean();
}

#[test]
fn devices_contexts_and_peer_access() {
    let root = TestRoot::new("devices");
    let mut a = root.spawn("a", &[]);
    assert_eq!(a.val("device-count"), "2");
    a.fails("get-device", 107002, rules::CONTEXT_REQUIRED);
    a.fails("set-device 2", 107001, rules::DEVICE_ID_RANGE);
    a.fails("set-device -1", 107001, rules::DEVICE_ID_RANGE);
    a.ok("set-device 1");
    assert_eq!(a.val("get-device"), "1");
    // The current device is per thread.
    assert_eq!(a.fail("thread-get-device").code, 107002);
    // Set twice, reset twice: the context lives until the last reset.
    a.ok("set-device 1");
    a.ok("reset-device 1");
    assert_eq!(a.val("get-device"), "1");
    a.ok("reset-device 1");
    a.fails("get-device", 107002, rules::CONTEXT_REQUIRED);
    a.ok("reset-device 0"); // not in use: no-op
    a.fails("reset-device 7", 107001, rules::DEVICE_ID_RANGE);

    assert_eq!(a.val("can-access 0 1"), "1");
    assert_eq!(a.val("can-access 1 0"), "1");
    assert_eq!(a.val("can-access 0 0"), "0");
    a.fails("can-access 0 2", 107001, rules::DEVICE_ID_RANGE);
    a.fails("enable-peer 1", 107002, rules::CONTEXT_REQUIRED);
    a.ok("set-device 0");
    a.fails("enable-peer 0", 107000, rules::PEER_DISTINCT);
    a.fails("enable-peer 1 1", 100000, rules::PARAM_RESERVED_ZERO);
    a.fails("enable-peer 5", 107001, rules::DEVICE_ID_RANGE);
    a.ok("enable-peer 1");
    a.ok("enable-peer 1");
    // The bare tgid is the pid (no container distinction).
    assert_eq!(a.val("bare-tgid"), a.pid().to_string());
    a.exit();

    let mut b = root.spawn("b", &[("DEVIPC_EMU_DEVICES", "3")]);
    assert_eq!(b.val("device-count"), "3");
    b.ok("set-device 2");
    b.exit();
    root.assert_clean();
}

#[test]
fn null_pointers_are_invalid_param() {
    let root = TestRoot::new("null");
    let mut a = root.spawn("a", &[]);
    a.ok("set-device 0");
    for case in NULL_CASES {
        let f = a.fail(&format!("null {case}"));
        assert_eq!(f.code, 100000, "{case}: {}", f.message);
        assert!(
            f.message.contains(rules::PARAM_NULL_POINTER),
            "{case}: {}",
            f.message
        );
    }
    // Pid arrays follow their own documented rules: NULL or 0 entries.
    a.fails("set-pid 1", 100000, rules::VMM_SET_PID_ARGS);
    a.fails("set-pid-zero 1 5", 100000, rules::VMM_SET_PID_ARGS);
    a.fails(
        "key-set-pid devipc-emu:acl:memkey:0000010000000001",
        107000,
        rules::KEY_SET_PID_ARGS,
    );
    let n = a.val("notify-create");
    a.fails(
        &format!("notify-set-pid {n}"),
        107000,
        rules::NOTIFY_SET_PID_ARGS,
    );
    a.ok(&format!("notify-destroy {n}"));
    a.exit();
    root.assert_clean();
}

#[test]
fn malloc_copies_fills_and_address_ranges() {
    let root = TestRoot::new("memory");
    let mut a = root.spawn("a", &[]);
    a.fails("malloc 4096", 107002, rules::CONTEXT_REQUIRED);
    a.ok("set-device 1");
    a.fails("malloc 0", 100000, rules::PARAM_SIZE_NONZERO);
    a.fails("malloc 4096 8", 100000, rules::PARAM_ENUM_VALUE);
    let p = a.val("malloc 10000 2");
    let base = u64::from_str_radix(&p[2..], 16).unwrap();
    // The block: 10000 rounded up to 32 plus 32, charged to device 1.
    let block = 10016 + 32;
    assert_eq!(root.used(1), block);
    assert_eq!(root.used(0), 0);
    a.ok(&format!("write {p} 7 10000"));
    a.ok(&format!("check {p} 7 10000"));
    // Interior pointers resolve to the block.
    let inner = format!("{:#x}", base + 5000);
    assert_eq!(
        a.ok(&format!("range {inner}")),
        [p.clone(), block.to_string()]
    );
    a.fails(
        &format!("range {:#x}", base + block),
        107000,
        rules::MEM_KNOWN_POINTER,
    );
    // Device to device inside the block (overlapping is fine).
    a.ok(&format!("memcpy {inner} 5000 {p} 5000 3"));
    a.ok(&format!("check {p} 7 5000 5000"));
    // Fill, then read back.
    a.ok(&format!("memset {p} 10000 171 4096"));
    a.ok(&format!("check-byte {p} 4096 171"));
    a.fails(
        &format!("memset {p} 100 0 101"),
        107000,
        rules::MEM_COPY_BOUNDS,
    );
    a.fails(
        &format!("memset {inner} 9000 0 9000"),
        107000,
        rules::MEM_COPY_BOUNDS,
    );
    // count > destMax, past the end of the block, wrong kind, unknown kind.
    let host = a.val("host-alloc 20000");
    a.fails(
        &format!("memcpy {p} 10 {host} 11 1"),
        107000,
        rules::MEM_COPY_BOUNDS,
    );
    a.fails(
        &format!("memcpy {inner} 9000 {host} 9000 1"),
        107000,
        rules::MEM_COPY_BOUNDS,
    );
    a.fails(
        &format!("memcpy {host} 100 {p} 100 1"),
        107000,
        rules::MEM_COPY_KIND,
    );
    a.fails(
        &format!("memcpy {p} 100 {host} 100 2"),
        107000,
        rules::MEM_COPY_KIND,
    );
    a.fails(
        &format!("memcpy {p} 100 {host} 100 0"),
        107000,
        rules::MEM_COPY_KIND,
    );
    a.fails(
        &format!("memcpy {p} 100 {host} 100 99"),
        100000,
        rules::PARAM_ENUM_VALUE,
    );
    // ACL_MEMCPY_DEFAULT infers the direction; host to host works too.
    a.ok(&format!("memcpy {host} 100 {p} 100 4"));
    a.ok(&format!("memcpy {host} 100 {host} 100 0"));
    a.ok(&format!("memset {host} 100 1 100"));
    // aclrtFree wants the base of a block of this process.
    a.fails(&format!("free {inner}"), 107000, rules::MEM_KNOWN_POINTER);
    a.fails(&format!("free {host}"), 107000, rules::MEM_KNOWN_POINTER);
    a.ok(&format!("free {p}"));
    a.fails(&format!("free {p}"), 107000, rules::MEM_KNOWN_POINTER);
    a.fails(&format!("range {p}"), 107000, rules::MEM_KNOWN_POINTER);
    assert_eq!(root.used(1), 0);
    a.exit();
    root.assert_clean();
}

#[test]
fn streams_are_checked_handles_and_synchronous() {
    let root = TestRoot::new("streams");
    let mut a = root.spawn("a", &[]);
    a.fails("stream-create", 107002, rules::CONTEXT_REQUIRED);
    a.ok("set-device 0");
    let s = a.val("stream-create");
    a.ok(&format!("stream-sync {s}"));
    a.ok("stream-sync 0"); // the default stream
    a.fails("stream-sync 0x1234", 107017, rules::HANDLE_VALID);
    // Asynchronous copies on an idle stream (or the default stream) are done when the call
    // returns; they are checked like synchronous ones.
    let p = a.val("malloc 8192");
    let q = a.val("malloc 8192");
    let host = a.val("host-alloc 8192");
    a.ok(&format!("write {p} 3 8192"));
    a.ok(&format!("memcpy-async {q} 8192 {p} 8192 3 {s}"));
    a.ok(&format!("stream-sync {s}"));
    a.ok(&format!("check {q} 3 8192"));
    a.ok(&format!("memcpy-async {host} 8192 {q} 8192 2"));
    a.ok(&format!("memcpy-async {p} 8192 {host} 4096 1 {s}"));
    a.ok(&format!("check {p} 3 4096"));
    a.fails(
        &format!("memcpy-async {q} 8192 {p} 8192 3 0x1234"),
        107017,
        rules::HANDLE_VALID,
    );
    a.fails(
        &format!("memcpy-async {q} 100 {p} 101 3 {s}"),
        107000,
        rules::MEM_COPY_BOUNDS,
    );
    a.fails(
        &format!("memcpy-async {q} 100 {host} 100 3 {s}"),
        107000,
        rules::MEM_COPY_KIND,
    );
    a.ok(&format!("free {p}"));
    a.ok(&format!("free {q}"));
    a.ok(&format!("stream-destroy {s}"));
    a.fails(&format!("stream-destroy {s}"), 107017, rules::HANDLE_VALID);
    a.fails(
        &format!("memcpy-async {host} 16 {host} 16 0 {s}"),
        107017,
        rules::HANDLE_VALID,
    );
    // Resetting the device destroys its streams.
    let s2 = a.val("stream-create");
    a.ok("reset-device 0");
    a.fails(&format!("stream-sync {s2}"), 107017, rules::HANDLE_VALID);
    a.exit();
    root.assert_clean();
}

#[test]
fn device_memory_limit_is_shared_across_processes() {
    let root = TestRoot::new("oom");
    let limit = [("DEVIPC_EMU_MEM_LIMIT", "6M")];
    let mut a = root.spawn("a", &limit);
    let mut b = root.spawn("b", &limit);
    a.ok("set-device 0");
    b.ok("set-device 0");
    let p = a.val(&format!("malloc {}", 3 << 20));
    // B sees A's usage: 3 MiB + padding used, 2 MiB + 3 MiB do not fit.
    let h = b.val(&format!("malloc-physical 0 {}", 2 << 20));
    b.fails(
        &format!("malloc {}", 1 << 20),
        207001,
        rules::MEM_DEVICE_LIMIT,
    );
    b.fails(
        &format!("malloc-physical 0 {}", 2 << 20),
        207001,
        rules::MEM_DEVICE_LIMIT,
    );
    // Another device has its own budget.
    let h1 = b.val(&format!("malloc-physical 1 {}", 4 << 20));
    // Freeing in A makes room for B.
    a.ok(&format!("free {p}"));
    let q = b.val(&format!("malloc {}", 3 << 20));
    b.ok(&format!("free {q}"));
    b.ok(&format!("free-physical {h}"));
    b.ok(&format!("free-physical {h1}"));
    a.exit();
    b.exit();
    root.assert_clean();
}

#[test]
fn versions_and_recent_error_message() {
    let root = TestRoot::new("versions");
    let mut a = root.spawn("a", &[]);
    assert_eq!(a.ok("version"), ["1", "16", "0"]);
    assert_eq!(a.val("version-str runtime"), "8.5.0-devipc-emulator");
    assert_eq!(a.val("version-str driver"), "8.5.0-devipc-emulator");
    let f = a.fail("version-str no-such-package");
    assert_eq!(f.code, 100003, "{}", f.message);
    // The shell read (and so cleared) the message of that failure: it is gone now.
    assert_eq!(a.val("errmsg"), "[]");
    // The message names the function, the code's name and the rule.
    let f = a.fail("get-device");
    assert!(
        f.message.starts_with("aclrtGetDevice: ")
            && f.message.contains("ACL_ERROR_RT_CONTEXT_NULL 107002")
            && f.message
                .ends_with("[rule ascend.context.set-device-required]"),
        "{}",
        f.message
    );
    a.exit();
    root.assert_clean();
}

#[test]
fn a_breakable_rule_can_be_switched_off_and_others_cannot() {
    let root = TestRoot::new("break");
    let mut a = root.spawn("a", &[("DEVIPC_EMU_BREAK_RULE", rules::CONTEXT_REQUIRED)]);
    // Without the rule, the current device defaults to 0.
    assert_eq!(a.val("get-device"), "0");
    let p = a.val("malloc 64");
    a.ok(&format!("free {p}"));
    // Other rules still hold.
    a.fails("set-device 9", 107001, rules::DEVICE_ID_RANGE);
    a.exit();

    // A rule that cannot be switched off is refused by the configuration, by name (the
    // same refusal as the HIP surface's, see `hip_break_rules`).
    let err = break_rule_config_error(rules::PARAM_NULL_POINTER);
    assert!(err.contains("cannot be switched off"), "{err}");
    let id = rules::PARAM_NULL_POINTER;
    assert_eq!(err, unswitchable_refusal(id, id));
    // A process given it fails its first call on the emulator with that error.
    let mut a = root.spawn("a", &[("DEVIPC_EMU_BREAK_RULE", id)]);
    let f = a.fail("set-device 0");
    assert_eq!(f.code, 507899, "{f:?}");
    assert!(f.message.contains(&err), "{f:?}");
    a.exit();
    root.assert_clean();
}

#[test]
fn the_rule_table_lists_every_rule_with_code_and_source() {
    use devipc_emulator::acl::rules::{ALL, Basis};
    assert!(ALL.len() >= 40);
    for r in ALL {
        let basis = match r.basis {
            Basis::Documented => "documented".to_owned(),
            Basis::Implementation => "implementation".to_owned(),
            Basis::Chosen(why) => format!("chosen: {why}"),
            Basis::Behaviour => "behaviour".to_owned(),
        };
        eprintln!("{:<48} {:>6}  {basis}", r.id, r.code);
    }
    for id in [
        "ascend.vmm.same-process-import-rejected",
        "ascend.vmm.one-export-per-handle",
        "ascend.vmm.one-import-per-process",
        "ascend.vmm.trustlist-required",
        "ascend.vmm.lifetime-until-all-freed",
        "ascend.vmm.device-range-checked",
        "ascend.vmm.cross-device-needs-peer-access",
        "ascend.ipc-key.min-len-65",
        "ascend.ipc-key.trustlist-required",
        "ascend.ipc-key.repeat-import-allowed",
        "ascend.ipc-key.importers-close-first",
        "ascend.notify.min-len-65",
        "ascend.notify.trustlist-required",
        "ascend.notify.binary-semaphore",
    ] {
        assert!(rules::info(id).is_some(), "{id} missing");
    }
}

#[test]
fn every_rule_is_exercised_by_a_test() {
    // Pairs `pub const NAME: &str = "id";` of the rule tables' sources, checked against the
    // test sources.
    let tables = [
        include_str!("../../src/acl/rules/device.rs"),
        include_str!("../../src/acl/rules/memory.rs"),
        include_str!("../../src/acl/rules/vmm.rs"),
        include_str!("../../src/acl/rules/ipc_key.rs"),
        include_str!("../../src/acl/rules/notify.rs"),
        include_str!("../../src/acl/rules/batch.rs"),
    ]
    .concat();
    let tests = [
        include_str!("acl_basics.rs"),
        include_str!("acl_vmm.rs"),
        include_str!("acl_visibility.rs"),
        include_str!("acl_ipc_key.rs"),
        include_str!("acl_notify.rs"),
        include_str!("acl_events.rs"),
        include_str!("acl_streams.rs"),
        include_str!("acl_batch.rs"),
    ]
    .concat();
    let mut checked = 0;
    for item in tables.split("pub const ").skip(1) {
        let Some((name, rest)) = item.split_once(": &str =") else {
            continue;
        };
        let id = rest.split('"').nth(1).unwrap();
        assert!(rules::info(id).is_some(), "{id} is not in rules::ALL");
        assert!(
            tests.contains(&format!("rules::{name}")),
            "no test exercises rule {id} (rules::{name})"
        );
        checked += 1;
    }
    assert_eq!(checked, rules::ALL.len(), "every rule constant was found");
}

#[test]
fn device_sync_memory_info_host_memory_and_forced_resets() {
    let root = TestRoot::new("device-extras");
    let limit = [("DEVIPC_EMU_MEM_LIMIT", "64M")];
    let mut a = root.spawn("a", &limit);
    let mut b = root.spawn("b", &limit);
    // Everything here works on the current device (rules::CONTEXT_REQUIRED).
    for cmd in [
        "sync-device",
        "sync-device-timeout 10",
        "mem-info 1",
        "malloc-host 64",
    ] {
        a.fails(cmd, 107002, rules::CONTEXT_REQUIRED);
    }
    a.ok("set-device 1");
    b.ok("set-device 1");
    a.ok("sync-device");
    a.ok("sync-device-timeout -1");
    a.ok("sync-device-timeout 0");
    a.fails("sync-device-timeout -2", 107000, rules::PARAM_RUNTIME_RANGE);

    // HBM free/total of the current device, as every process sees it (ACL_HBM_MEM = 1).
    let total = (64u64 << 20).to_string();
    assert_eq!(a.ok("mem-info 1"), [total.clone(), total.clone()]);
    let p = b.val(&format!("malloc {}", 4 << 20));
    let used = (4u64 << 20) + 32;
    let free = ((64u64 << 20) - used).to_string();
    assert_eq!(a.ok("mem-info 1"), [free.clone(), total.clone()]);
    assert_eq!(
        a.ok("mem-info 4"),
        [free, total.clone()],
        "ACL_HBM_MEM_HUGE"
    );
    // Device 0 is untouched; the device DDR kinds report nothing (HBM only).
    a.ok("set-device 0");
    assert_eq!(a.ok("mem-info 1"), [total.clone(), total]);
    assert_eq!(a.ok("mem-info 0"), ["0", "0"], "ACL_DDR_MEM");
    a.fails("mem-info 12", 107000, rules::PARAM_RUNTIME_RANGE);
    a.fails("mem-info -1", 107000, rules::PARAM_RUNTIME_RANGE);
    b.ok(&format!("free {p}"));

    // Host memory: page aligned, host memory for copies, its block in the address range
    // query (rounded up to 32), freed once.
    a.fails("malloc-host 0", 100000, rules::PARAM_SIZE_NONZERO);
    let h = a.val("malloc-host 100");
    assert_eq!(u64::from_str_radix(&h[2..], 16).unwrap() % 4096, 0);
    assert_eq!(a.ok(&format!("range {h}")), [h.clone(), "128".to_owned()]);
    let d = a.val("malloc 4096");
    a.ok(&format!("write {d} 9 100"));
    a.ok(&format!("memcpy {h} 100 {d} 100 2"));
    a.fails(
        &format!("memcpy {h} 100 {d} 100 3"),
        107000,
        rules::MEM_COPY_KIND,
    );
    a.ok(&format!("memcpy {d} 100 {h} 100 1"));
    a.ok(&format!("check {d} 9 100"));
    a.fails(&format!("free {h}"), 107000, rules::MEM_KNOWN_POINTER);
    a.fails(&format!("free-host {d}"), 107000, rules::MEM_KNOWN_POINTER);
    a.ok(&format!("free-host {h}"));
    a.fails(&format!("free-host {h}"), 107000, rules::MEM_KNOWN_POINTER);
    a.fails(&format!("range {h}"), 107000, rules::MEM_KNOWN_POINTER);
    a.ok(&format!("free {d}"));

    // A forced destroy takes a live stream; a forced reset drops every use of the device
    // at once (one reset after three set-device calls), with its streams.
    let s = a.val("stream-create");
    a.ok(&format!("stream-destroy-force {s}"));
    a.fails(&format!("stream-destroy {s}"), 107017, rules::HANDLE_VALID);
    a.ok("set-device 0");
    a.ok("set-device 0");
    let s = a.val("stream-create");
    a.ok("reset-device-force 0");
    a.fails("get-device", 107002, rules::CONTEXT_REQUIRED);
    a.fails(&format!("stream-sync {s}"), 107017, rules::HANDLE_VALID);
    // Device 1 is still set (two uses left from above); a forced reset of an unused device
    // is a no-op; bad ids are refused.
    a.ok("reset-device-force 0");
    a.fails("reset-device-force 7", 107001, rules::DEVICE_ID_RANGE);
    a.ok("set-device 1");
    a.ok("reset-device-force 1");
    a.fails("get-device", 107002, rules::CONTEXT_REQUIRED);
    a.exit();
    b.exit();
    root.assert_clean();
}
