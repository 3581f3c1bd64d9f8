//! Every rule of the HIP surface can be switched off with `DEVIPC_EMU_BREAK_RULE`, and
//! then the scenario that shows the rule behaves differently (so a conformance scenario
//! for the rule can be seen to fail). One test per rule, each in its own state directory
//! with real child processes; [`every_rule_has_a_break_scenario`] keeps the list complete.

use crate::emu_support::{break_rule_config_error, unswitchable_refusal, unswitchable_rules};
use crate::hip_support::*;
use devipc_emulator::hip::rules::{self, *};
use devipc_hip_sys::*;

/// Entry point of the child processes (a no-op in the parent run).
#[test]
fn child_role() {
    child_main();
}

const IPC: u32 = hipEventInterprocess | hipEventDisableTiming;

/// The rules the tests below break, one test each.
const COVERED: &[&str] = &[
    INIT_FLAGS_MUST_BE_ZERO,
    MEM_FLAGS_MUST_EQUAL_LAZY_ENABLE,
    MEM_INVALID_HANDLE_REJECTED,
    MEM_OPEN_IN_EXPORTER_REJECTED,
    MEM_OPEN_RETURNS_BASE,
    MEM_OPEN_TWICE_REFCOUNTED,
    MEM_OPEN_AFTER_FREE_REJECTED,
    MEM_CLOSE_NON_IPC_POINTER_REJECTED,
    MEM_ADDRESS_RANGE_UNKNOWN_NOT_FOUND,
    EVENT_INTERPROCESS_NEEDS_DISABLE_TIMING,
    EVENT_UNKNOWN_FLAGS_REJECTED,
    EVENT_ONE_RELEASE_FLAG,
    EVENT_EXPORT_NEEDS_INTERPROCESS,
    EVENT_OPEN_IN_EXPORTER_REJECTED,
    EVENT_INVALID_HANDLE_REJECTED,
    EVENT_UNRECORDED_IS_COMPLETE,
    STREAM_WAIT_EVENT_FLAGS_MUST_BE_ZERO,
    PEER_SELF_IS_NOT_A_PEER,
    PEER_ENABLE_FLAGS_MUST_BE_ZERO,
    PEER_ALREADY_ENABLED_REJECTED,
    MEM_FREE_WHILE_OPENED,
    PEER_TOPOLOGY_RESPECTED,
];

/// A rule that cannot be switched off, of either surface, is refused by the configuration
/// with the same message naming it; a HIP process given one fails its first call with it
/// (the ACL side: `acl_basics::a_breakable_rule_can_be_switched_off_and_others_cannot`).
#[test]
fn a_rule_that_cannot_be_switched_off_is_refused_by_name() {
    let fixed = unswitchable_rules();
    for vendor in ["ascend.", "hip."] {
        assert!(fixed.iter().any(|r| r.id.starts_with(vendor)), "{vendor}");
    }
    for r in &fixed {
        assert_eq!(
            break_rule_config_error(r.id),
            unswitchable_refusal(r.id, r.id)
        );
        // Listed after a rule that can be switched off, too.
        let list = format!("{INIT_FLAGS_MUST_BE_ZERO},{}", r.id);
        assert_eq!(
            break_rule_config_error(&list),
            unswitchable_refusal(&list, r.id)
        );
    }

    let root = TestRoot::new("hip-unswitchable");
    let mut a = Hip::spawn(
        "a",
        &root,
        "6.2",
        &[("DEVIPC_EMU_BREAK_RULE", VMM_ARGS_VALID)],
    );
    a.expect_code("init 0", hipErrorNotInitialized);
    let last = a.run("lasterr").rest;
    assert!(
        last.contains(&unswitchable_refusal(VMM_ARGS_VALID, VMM_ARGS_VALID)),
        "{last}"
    );
    a.exit();
    root.assert_clean();
}

#[test]
fn every_rule_has_a_break_scenario() {
    let mut all: Vec<&str> = rules::ALL.iter().map(|r| r.id).collect();
    let mut covered = COVERED.to_vec();
    // The VMM rules' scenarios (broken and not) live with the VMM tests.
    covered.extend(crate::hip_vmm::COVERED);
    // The device-identity rules (issue 16) live with the visibility tests.
    covered.extend(crate::hip_visibility::COVERED);
    // The device queries and driver-style copies (issue 25) live with their tests.
    covered.extend(crate::hip_device_queries::COVERED);
    // hipMemcpyBatchAsync (issue 25) too.
    covered.extend(crate::hip_batch::COVERED);
    all.sort_unstable();
    covered.sort_unstable();
    assert_eq!(all, covered);
}

/// Runs `scenario` with `rule` switched off in every child it spawns, then checks the
/// state directory is clean.
fn broken(rule: &str, version: &str, scenario: impl FnOnce(&TestRoot, &dyn Fn(&str) -> Hip)) {
    let root = TestRoot::new(&format!("broken-{rule}"));
    let spawn = |name: &str| {
        Hip::spawn(
            name,
            &root,
            version,
            &[("DEVIPC_EMU_BREAK_RULE", rule), ("DEVIPC_EMU_DEVICES", "3")],
        )
    };
    scenario(&root, &spawn);
    root.assert_clean();
}

/// An exporter with a 64 KiB allocation exported at `offset`: (child, pointer, handle).
fn exported(spawn: &dyn Fn(&str) -> Hip, offset: u64) -> (Hip, u64, String) {
    let mut a = spawn("exporter");
    let p = a.ok("malloc 65536").num(0);
    a.ok(&format!("fill {} 65536 7", hexptr(p)));
    let h = a
        .ok(&format!("export {}", hexptr(p + offset)))
        .val(0)
        .to_owned();
    (a, p, h)
}

#[test]
fn broken_init_flags() {
    broken(INIT_FLAGS_MUST_BE_ZERO, "6.2", |_, spawn| {
        let mut a = spawn("a");
        a.ok("init 1");
        a.exit();
    });
}

#[test]
fn broken_mem_flags() {
    for version in VERSIONS {
        broken(MEM_FLAGS_MUST_EQUAL_LAZY_ENABLE, version, |_, spawn| {
            let (mut a, p, h) = exported(spawn, 0);
            let mut b = spawn("importer");
            let q = b.ok(&format!("open {h} {}", 1 - lazy(version))).num(0);
            let q2 = b.ok(&format!("open {h} 77")).num(0);
            assert_eq!(q, q2);
            b.ok(&format!("close {}", hexptr(q)));
            b.ok(&format!("close {}", hexptr(q)));
            a.ok(&format!("free {}", hexptr(p)));
            a.exit();
            b.exit();
        });
    }
}

#[test]
fn broken_mem_invalid_handle() {
    broken(MEM_INVALID_HANDLE_REJECTED, "6.2", |_, spawn| {
        let mut b = spawn("importer");
        // No validation: the attach step fails instead, with its own code.
        b.expect_code(
            &format!("open {} 1", "00".repeat(64)),
            hipErrorInvalidDevicePointer,
        );
        b.exit();
    });
}

#[test]
fn broken_mem_open_in_exporter() {
    for version in VERSIONS {
        broken(MEM_OPEN_IN_EXPORTER_REJECTED, version, |root, spawn| {
            let (mut a, p, h) = exported(spawn, 0);
            let q = a.ok(&format!("open {h} {}", lazy(version))).num(0);
            assert_ne!(q, p, "a second mapping of the exporter's own memory");
            assert_eq!(a.ok(&format!("check {} 65536 7", hexptr(q))).val(0), "same");
            assert_eq!(root.meta(&h).hold_count(a.identity()), 2);
            a.ok(&format!("close {}", hexptr(q)));
            a.ok(&format!("free {}", hexptr(p)));
            a.exit();
        });
    }
}

#[test]
fn broken_mem_open_returns_base() {
    broken(MEM_OPEN_RETURNS_BASE, "6.2", |_, spawn| {
        let (mut a, p, h) = exported(spawn, 1000);
        let mut b = spawn("importer");
        let q = b.ok(&format!("open {h} 1")).num(0);
        let r = b.ok(&format!("range {}", hexptr(q)));
        assert_eq!(
            q,
            r.num(0) + 1000,
            "base + offset, as ROCm 4.0/4.1 returned"
        );
        b.ok(&format!("close {}", hexptr(q)));
        a.ok(&format!("free {}", hexptr(p)));
        a.exit();
        b.exit();
    });
}

#[test]
fn broken_mem_open_twice_refcounted() {
    broken(MEM_OPEN_TWICE_REFCOUNTED, "5.2", |_, spawn| {
        let (mut a, p, h) = exported(spawn, 0);
        let mut b = spawn("importer");
        let q1 = b.ok(&format!("open {h} 0")).num(0);
        let q2 = b.ok(&format!("open {h} 0")).num(0);
        assert_ne!(q1, q2, "every open maps again");
        b.ok(&format!("fill {} 16 3", hexptr(q1)));
        assert_eq!(b.ok(&format!("check {} 16 3", hexptr(q2))).val(0), "same");
        b.ok(&format!("close {}", hexptr(q1)));
        // Unmapped: 5.2 answers an unknown pointer with hipErrorInvalidDevicePointer.
        b.expect_code(
            &format!("range {}", hexptr(q1)),
            hipErrorInvalidDevicePointer,
        );
        b.ok(&format!("close {}", hexptr(q2)));
        a.ok(&format!("free {}", hexptr(p)));
        a.exit();
        b.exit();
    });
}

#[test]
fn broken_mem_open_after_free() {
    // The early importer keeps the memory alive, which is itself a violation unless that
    // rule is off too.
    let both = format!("{MEM_OPEN_AFTER_FREE_REJECTED},{MEM_FREE_WHILE_OPENED}");
    broken(&both, "6.2", |_, spawn| {
        let (mut a, p, h) = exported(spawn, 0);
        let mut b = spawn("early");
        let q = b.ok(&format!("open {h} 1")).num(0);
        a.ok(&format!("free {}", hexptr(p)));
        let mut c = spawn("late");
        let r = c.ok(&format!("open {h} 1")).num(0);
        assert_eq!(c.ok(&format!("check {} 65536 7", hexptr(r))).val(0), "same");
        c.ok(&format!("close {}", hexptr(r)));
        b.ok(&format!("close {}", hexptr(q)));
        for child in [a, b, c] {
            child.exit();
        }
    });
}

#[test]
fn broken_mem_free_while_opened() {
    // The importer keeps the pages: reads still see the data, nothing is recorded.
    broken(MEM_FREE_WHILE_OPENED, "6.2", |root, spawn| {
        let (mut a, p, h) = exported(spawn, 0);
        let mut b = spawn("importer");
        let q = b.ok(&format!("open {h} 1")).num(0);
        a.ok(&format!("free {}", hexptr(p)));
        assert_eq!(b.ok(&format!("check {} 65536 7", hexptr(q))).val(0), "same");
        assert!(root.violations().is_empty());
        b.ok(&format!("close {}", hexptr(q)));
        for child in [a, b] {
            child.exit();
        }
    });
}

#[test]
fn broken_peer_topology() {
    // Nothing connects the devices, yet every pair peers and opens across devices.
    let root = TestRoot::new("broken-topology");
    let env = [
        ("DEVIPC_EMU_BREAK_RULE", PEER_TOPOLOGY_RESPECTED),
        ("DEVIPC_EMU_DEVICES", "2"),
        ("DEVIPC_EMU_PEERS", "none"),
    ];
    let mut a = Hip::spawn("exporter", &root, "6.2", &env);
    assert_eq!(
        a.ok("can_peer 0 1").val(0),
        "0",
        "the report is the topology"
    );
    a.ok("enable_peer 1 0");
    let p = a.ok("malloc 4096").num(0);
    let h = a.ok(&format!("export {}", hexptr(p))).val(0).to_owned();
    let mut b = Hip::spawn("importer", &root, "6.2", &env);
    b.ok("setdev 1");
    let q = b.ok(&format!("open {h} 1")).num(0);
    b.ok(&format!("close {}", hexptr(q)));
    a.ok(&format!("free {}", hexptr(p)));
    for child in [a, b] {
        child.exit();
    }
    root.assert_clean();
}

#[test]
fn broken_mem_close_non_ipc_pointer() {
    broken(MEM_CLOSE_NON_IPC_POINTER_REJECTED, "6.2", |_, spawn| {
        let mut a = spawn("a");
        let p = a.ok("malloc 4096").num(0);
        a.ok(&format!("close {}", hexptr(p)));
        a.ok("close 0x1000");
        a.ok(&format!("fill {} 4096 1", hexptr(p)));
        a.ok(&format!("free {}", hexptr(p)));
        a.exit();
    });
}

#[test]
fn broken_mem_address_range_not_found() {
    broken(MEM_ADDRESS_RANGE_UNKNOWN_NOT_FOUND, "6.2", |_, spawn| {
        let mut a = spawn("a");
        a.expect_code("range 0x1000", hipErrorInvalidDevicePointer);
        a.exit();
    });
}

#[test]
fn broken_event_interprocess_needs_disable_timing() {
    broken(
        EVENT_INTERPROCESS_NEEDS_DISABLE_TIMING,
        "6.2",
        |_, spawn| {
            let mut a = spawn("a");
            let e = a
                .ok(&format!("event_create {hipEventInterprocess}"))
                .val(0)
                .to_owned();
            let h = a.ok(&format!("event_export {e}")).val(0).to_owned();
            let mut b = spawn("b");
            let eb = b.ok(&format!("event_open {h}")).val(0).to_owned();
            b.ok(&format!("event_destroy {eb}"));
            a.ok(&format!("event_destroy {e}"));
            a.exit();
            b.exit();
        },
    );
}

#[test]
fn broken_event_unknown_flags() {
    broken(EVENT_UNKNOWN_FLAGS_REJECTED, "5.2", |_, spawn| {
        let mut a = spawn("a");
        for flags in [0x100, hipEventDisableSystemFence] {
            let e = a.ok(&format!("event_create {flags}")).val(0).to_owned();
            a.ok(&format!("event_destroy {e}"));
        }
        a.exit();
    });
}

#[test]
fn broken_event_one_release_flag() {
    broken(EVENT_ONE_RELEASE_FLAG, "6.2", |_, spawn| {
        let mut a = spawn("a");
        let flags = hipEventReleaseToDevice | hipEventReleaseToSystem;
        let e = a.ok(&format!("event_create {flags}")).val(0).to_owned();
        a.ok(&format!("event_destroy {e}"));
        a.exit();
    });
}

#[test]
fn broken_event_export_needs_interprocess() {
    broken(EVENT_EXPORT_NEEDS_INTERPROCESS, "6.2", |_, spawn| {
        let mut a = spawn("a");
        let e = a.ok("event_create 0").val(0).to_owned();
        a.ok(&format!("record {e} 0x0"));
        let h = a.ok(&format!("event_export {e}")).val(0).to_owned();
        // The event moved into shared memory: another process sees its records.
        let mut b = spawn("b");
        let eb = b.ok(&format!("event_open {h}")).val(0).to_owned();
        b.ok(&format!("query {eb}"));
        a.ok("hold 0x0");
        a.ok(&format!("record {e} 0x0"));
        b.expect_code(&format!("query {eb}"), hipErrorNotReady);
        a.ok("release 0x0");
        b.ok(&format!("query {eb}"));
        b.ok(&format!("event_destroy {eb}"));
        a.ok(&format!("event_destroy {e}"));
        a.exit();
        b.exit();
    });
}

#[test]
fn broken_event_open_in_exporter() {
    broken(EVENT_OPEN_IN_EXPORTER_REJECTED, "5.2", |_, spawn| {
        let mut a = spawn("a");
        let e = a.ok(&format!("event_create {IPC}")).val(0).to_owned();
        let h = a.ok(&format!("event_export {e}")).val(0).to_owned();
        let e2 = a.ok(&format!("event_open {h}")).val(0).to_owned();
        assert_ne!(e, e2);
        a.ok("hold 0x0");
        a.ok(&format!("record {e} 0x0"));
        a.expect_code(&format!("query {e2}"), hipErrorNotReady);
        a.ok("release 0x0");
        a.ok(&format!("event_destroy {e2}"));
        a.ok(&format!("event_destroy {e}"));
        a.exit();
    });
}

#[test]
fn broken_event_invalid_handle() {
    broken(EVENT_INVALID_HANDLE_REJECTED, "6.2", |_, spawn| {
        let mut a = spawn("a");
        a.expect_code(&format!("event_open {}", "00".repeat(64)), hipErrorUnknown);
        a.exit();
    });
}

#[test]
fn broken_event_unrecorded_is_complete() {
    broken(EVENT_UNRECORDED_IS_COMPLETE, "6.2", |_, spawn| {
        let mut a = spawn("a");
        let e = a.ok(&format!("event_create {IPC}")).val(0).to_owned();
        a.expect_code(&format!("query {e}"), hipErrorNotReady);
        a.bg("sync", &format!("event_sync {e}"));
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!a.bg_done("sync"), "waits for the first record");
        a.ok(&format!("record {e} 0x0"));
        assert_eq!(a.bg_result("sync").code, hipSuccess);
        a.ok(&format!("query {e}"));
        a.ok(&format!("event_destroy {e}"));
        a.exit();
    });
}

#[test]
fn broken_stream_wait_event_flags() {
    broken(STREAM_WAIT_EVENT_FLAGS_MUST_BE_ZERO, "6.2", |_, spawn| {
        let mut a = spawn("a");
        let e = a.ok("event_create 0").val(0).to_owned();
        a.ok(&format!("wait_event 0x0 {e} 1"));
        a.ok(&format!("event_destroy {e}"));
        a.exit();
    });
}

#[test]
fn broken_peer_self() {
    broken(PEER_SELF_IS_NOT_A_PEER, "6.2", |_, spawn| {
        let mut a = spawn("a");
        assert_eq!(a.ok("can_peer 1 1").val(0), "1");
        a.ok("enable_peer 0 0");
        a.exit();
    });
}

#[test]
fn broken_peer_flags() {
    broken(PEER_ENABLE_FLAGS_MUST_BE_ZERO, "6.2", |_, spawn| {
        let mut a = spawn("a");
        a.ok("enable_peer 1 5");
        a.exit();
    });
}

#[test]
fn broken_peer_already_enabled() {
    broken(PEER_ALREADY_ENABLED_REJECTED, "6.2", |_, spawn| {
        let mut a = spawn("a");
        a.ok("enable_peer 1 0");
        a.ok("enable_peer 1 0");
        a.exit();
    });
}

#[test]
fn only_the_broken_rule_is_off() {
    broken(MEM_OPEN_RETURNS_BASE, "6.2", |_, spawn| {
        let mut a = spawn("a");
        a.expect_rule("init 1", hipErrorInvalidValue, INIT_FLAGS_MUST_BE_ZERO);
        a.expect_rule(
            "range 0x1000",
            hipErrorNotFound,
            MEM_ADDRESS_RANGE_UNKNOWN_NOT_FOUND,
        );
        a.exit();
    });
}
