//! Issue 16, ACL: user, logical and physical device ids across real processes with
//! different `ASCEND_RT_VISIBLE_DEVICES` (and container views,
//! `DEVIPC_EMU_ASCEND_PHY_IDS`): the UUID and the translations agree on the physical device,
//! memory exported through the VMM and IPC-key ABIs is recorded on it, ids outside the
//! view are refused with 107001, malformed lists read as the runtime reads them.
//!
//! The shell commands (`id-*`) are executed by [`exec`], reached from the ACL shell of
//! `acl_support`.

use devipc_ascend_sys::AclApi;
use devipc_ascend_sys::codes::{ACL_ERROR_INVALID_PARAM, ACL_ERROR_RT_INVALID_DEVICEID};
use devipc_ascend_sys::types::*;
use devipc_emulator::acl::rules;
use devipc_emulator::machine::ascend_uuid;

use crate::acl_support::*;
use crate::emu_support::hex;

/// Entry of child processes (see `acl_support`).
#[test]
fn child_role() {
    child_main();
}

// ---------------------------------------------------------------------------------------
// Child side: the `id-*` shell commands.

/// Whether `cmd` is one of this module's shell commands.
pub fn is_command(cmd: &str) -> bool {
    cmd.starts_with("id-")
}

/// Runs one `id-*` command: the status code and the values to print.
pub fn exec(api: &AclApi, cmd: &str, args: &[&str]) -> Result<(i32, Vec<String>), (i32, String)> {
    let n = |i: usize| -> Result<i32, (i32, String)> {
        args.get(i)
            .and_then(|t| t.parse::<i32>().ok())
            .ok_or((-1, format!("shell: {cmd} needs a number at {i}")))
    };
    macro_rules! opt {
        ($f:ident ( $($arg:expr),* )) => {{
            let f = api.$f.expect(concat!(stringify!($f), " is present in the emulator"));
            // SAFETY: valid out-pointers (or NULL, which the emulator checks).
            unsafe { f($($arg),*) }
        }};
    }
    let id = |code: i32, v: i32| Ok((code, vec![v.to_string()]));
    let mut out = -1;
    match cmd {
        "id-logic-by-user" => id(opt!(aclrtGetLogicDevIdByUserDevId(n(0)?, &mut out)), out),
        "id-user-by-logic" => id(opt!(aclrtGetUserDevIdByLogicDevId(n(0)?, &mut out)), out),
        "id-logic-by-phy" => id(opt!(aclrtGetLogicDevIdByPhyDevId(n(0)?, &mut out)), out),
        "id-phy-by-logic" => id(opt!(aclrtGetPhyDevIdByLogicDevId(n(0)?, &mut out)), out),
        "id-uuid" => {
            let mut u = aclrtUuid::default();
            let code = opt!(aclrtDeviceGetUuid(n(0)?, &mut u));
            Ok((code, vec![hex(&u.bytes.map(|b| b as u8))]))
        }
        "id-null" => {
            // Every function with a NULL out-pointer: the codes, space-separated.
            let null = std::ptr::null_mut();
            let codes = [
                opt!(aclrtGetLogicDevIdByUserDevId(0, null)),
                opt!(aclrtGetUserDevIdByLogicDevId(0, null)),
                opt!(aclrtGetLogicDevIdByPhyDevId(0, null)),
                opt!(aclrtGetPhyDevIdByLogicDevId(0, null)),
                opt!(aclrtDeviceGetUuid(0, std::ptr::null_mut())),
            ];
            Ok((0, codes.iter().map(i32::to_string).collect()))
        }
        other => Err((-1, format!("shell: unknown id command {other:?}"))),
    }
}

// ---------------------------------------------------------------------------------------
// Parent side.

/// Whether `cmd` succeeds.
fn succeeds(s: &mut Acl, cmd: &str) -> bool {
    s.send(cmd);
    s.reply().is_ok()
}

/// Producer sees user devices {0,1} = logical {2,3}, consumer {0,1} = logical {3,2}; with
/// `phy` the container maps logical i to physical `phy[i]` (default identity on 4
/// devices). Checks the identity of producer device 1 = consumer device 0, the
/// translations in the consumer, and memory through VMM and IPC keys.
fn one_device_two_user_ids(root: &TestRoot, devices: &str, phy: Option<&str>) {
    let (phy2, phy3) = match phy {
        Some(_) => (6, 7),
        None => (2, 3),
    };
    let env = |mask: &'static str| {
        let mut env = vec![
            ("DEVIPC_EMU_DEVICES", devices),
            ("ASCEND_RT_VISIBLE_DEVICES", mask),
        ];
        if let Some(p) = phy {
            env.push(("DEVIPC_EMU_ASCEND_PHY_IDS", p));
        }
        env
    };
    let mut a = root.spawn("producer", &env("2,3"));
    let mut b = root.spawn("consumer", &env("3,2"));
    for s in [&mut a, &mut b] {
        assert_eq!(s.val("device-count"), "2");
    }
    // The UUID of producer device 1 is the consumer's device 0's: physical `phy3`.
    let uuid = hex(&ascend_uuid(phy3));
    assert_eq!(a.val("id-uuid 1"), uuid);
    assert_eq!(b.val("id-uuid 0"), uuid);
    assert_eq!(a.val("id-uuid 0"), hex(&ascend_uuid(phy2)));
    // user -> logical -> physical, and back, in the consumer.
    assert_eq!(b.val("id-logic-by-user 0"), "3");
    assert_eq!(b.val("id-phy-by-logic 3"), phy3.to_string());
    assert_eq!(b.val(&format!("id-logic-by-phy {phy3}")), "3");
    assert_eq!(b.val("id-user-by-logic 3"), "0");
    assert_eq!(a.val("id-user-by-logic 3"), "1");

    // Outside the view: 107001 naming the rule.
    for s in [&mut a, &mut b] {
        s.fails(
            "id-logic-by-user 2",
            ACL_ERROR_RT_INVALID_DEVICEID,
            rules::DEVICE_ID_TRANSLATION,
        );
        s.fails(
            "id-uuid 2",
            ACL_ERROR_RT_INVALID_DEVICEID,
            rules::DEVICE_ID_TRANSLATION,
        );
        // Logical 0 and 1 exist but are not listed: no user id.
        s.fails(
            "id-user-by-logic 0",
            ACL_ERROR_RT_INVALID_DEVICEID,
            rules::DEVICE_ID_TRANSLATION,
        );
        s.fails(
            "id-phy-by-logic 4",
            ACL_ERROR_RT_INVALID_DEVICEID,
            rules::DEVICE_ID_TRANSLATION,
        );
        s.fails(
            "set-device 2",
            ACL_ERROR_RT_INVALID_DEVICEID,
            rules::DEVICE_ID_RANGE,
        );
        s.fails(
            "malloc-physical 2 2097152",
            ACL_ERROR_RT_INVALID_DEVICEID,
            rules::DEVICE_ID_RANGE,
        );
        s.fails(
            "can-access 0 2",
            ACL_ERROR_RT_INVALID_DEVICEID,
            rules::DEVICE_ID_RANGE,
        );
    }
    // The container lists physical 0..3 only (when remapped): physical 1 is not there.
    if phy.is_some() {
        b.fails(
            "id-logic-by-phy 1",
            ACL_ERROR_RT_INVALID_DEVICEID,
            rules::DEVICE_ID_TRANSLATION,
        );
        // Logical 0 is in the container although not listed: the driver's mapping.
        assert_eq!(b.val("id-phy-by-logic 0"), "4");
    }

    // VMM: physical memory on producer device 1, imported on consumer device 0.
    let size = 2u64 << 20;
    let h = a.val(&format!("malloc-physical 1 {size}"));
    let va = a.val(&format!("reserve {size}"));
    a.ok(&format!("map {va} {size} {h}"));
    a.ok("set-device 1");
    a.ok(&format!("write {va} 41 4096"));
    let sh = a.val(&format!("export {h}"));
    let id = root
        .state()
        .registry()
        .resolve(sh.parse().unwrap())
        .unwrap();
    assert_eq!(root.state().registry().get(id).unwrap().info().device, phy3);
    a.ok(&format!("set-pid {sh} {}", b.pid()));
    b.ok("set-device 0");
    let bh = b.val(&format!("import {sh} 0"));
    let bva = b.val(&format!("reserve {size}"));
    b.ok(&format!("map {bva} {size} {bh}"));
    b.ok(&format!("check {bva} 41 4096"));
    // Another user id of the consumer is another physical device: cross-device import.
    b.fail(&format!("import {sh} 1"));

    // IPC key: aclrtMalloc on producer device 1, imported with the consumer on device 0.
    let p = a.val("malloc 65536");
    a.ok(&format!("write {p} 43 65536"));
    let key = a.val(&format!("key-export {p} 65536"));
    a.ok(&format!("key-set-pid {key} {}", b.pid()));
    let q = b.val(&format!("key-import {key}"));
    b.ok(&format!("check {q} 43 65536"));
    b.ok(&format!("key-close {key}"));
    a.ok(&format!("key-close {key}"));
    a.ok(&format!("free {p}"));

    b.ok(&format!("unmap {bva}"));
    b.ok(&format!("release-address {bva}"));
    b.ok(&format!("free-physical {bh}"));
    a.ok(&format!("unmap {va}"));
    a.ok(&format!("release-address {va}"));
    a.ok(&format!("free-physical {h}"));
    a.exit();
    b.exit();
}

#[test]
fn ascend_rt_visible_devices_give_one_device_two_user_ids() {
    let root = TestRoot::new("acl-visibility");
    one_device_two_user_ids(&root, "4", None);
    root.assert_clean();
}

#[test]
fn a_container_remap_makes_the_chain_two_steps() {
    let root = TestRoot::new("acl-visibility-container");
    one_device_two_user_ids(&root, "8", Some("4,5,6,7"));
    root.assert_clean();
}

#[test]
fn malformed_lists_read_as_the_runtime_reads_them() {
    let root = TestRoot::new("acl-visibility-malformed");
    // (value, logical ids seen in user order), on 4 devices.
    let cases: &[(&str, &[i32])] = &[
        ("", &[]),
        ("1,9,0", &[1]),
        ("0,1,1", &[]),
        ("2*", &[2]),
        ("-1,3", &[]),
        (",0", &[]),
        ("3,2,", &[3, 2]),
    ];
    for (i, (value, want)) in cases.iter().enumerate() {
        let mut s = root.spawn(
            &format!("case{i}"),
            &[
                ("DEVIPC_EMU_DEVICES", "4"),
                ("ASCEND_RT_VISIBLE_DEVICES", value),
            ],
        );
        assert_eq!(s.val("device-count"), want.len().to_string(), "{value:?}");
        for (user, logical) in want.iter().enumerate() {
            assert_eq!(
                s.val(&format!("id-logic-by-user {user}")),
                logical.to_string()
            );
        }
        if want.is_empty() {
            s.fails(
                "set-device 0",
                ACL_ERROR_RT_INVALID_DEVICEID,
                rules::DEVICE_ID_RANGE,
            );
        }
        s.exit();
    }
    // Switched off, the variable is ignored.
    let mut s = root.spawn(
        "broken",
        &[
            ("DEVIPC_EMU_DEVICES", "4"),
            ("ASCEND_RT_VISIBLE_DEVICES", "3"),
            (
                "DEVIPC_EMU_BREAK_RULE",
                rules::DEVICE_VISIBLE_DEVICES_APPLIED,
            ),
        ],
    );
    assert_eq!(s.val("device-count"), "4");
    assert_eq!(s.val("id-logic-by-user 0"), "0");
    s.exit();
    root.assert_clean();
}

#[test]
fn null_out_pointers_are_refused() {
    let root = TestRoot::new("acl-visibility-null");
    let mut s = root.spawn("null", &[]);
    let codes = s.ok("id-null");
    assert_eq!(codes, vec![ACL_ERROR_INVALID_PARAM.to_string(); 5]);
    s.exit();
    root.assert_clean();
}

/// `aclrtMemSetAccess` reads user ids by default and logical ids with
/// `DEVIPC_EMU_ASCEND_SET_ACCESS_IDS=logical` (see the emulator's `acl::vmm`): the
/// descriptor naming the mapping's device, in that space, is the one copies obey.
#[test]
fn set_access_reads_the_configured_id_space() {
    let root = TestRoot::new("acl-visibility-set-access");
    let size = 2u64 << 20;
    // (space, the mapping's device in it, another device in it, an id that is none)
    for (space, mine, other, absent) in [("user", 0, None, 3), ("logical", 3, Some(0), 4)] {
        let mut s = root.spawn(
            space,
            &[
                ("DEVIPC_EMU_DEVICES", "4"),
                ("ASCEND_RT_VISIBLE_DEVICES", "3"),
                ("DEVIPC_EMU_ASCEND_SET_ACCESS_IDS", space),
            ],
        );
        s.ok("set-device 0");
        // User device 0 is logical (and physical) 3.
        let h = s.val(&format!("malloc-physical 0 {size}"));
        let va = s.val(&format!("reserve {size}"));
        s.ok(&format!("map {va} {size} {h}"));
        let read = ACL_RT_MEM_ACCESS_FLAGS_READ;
        let rw = ACL_RT_MEM_ACCESS_FLAGS_READWRITE;
        s.fails(
            &format!("set-access {va} {size} {rw} {absent}"),
            ACL_ERROR_RT_INVALID_DEVICEID,
            rules::DEVICE_ID_RANGE,
        );
        s.ok(&format!("write {va} 3 64"));
        if let Some(other) = other {
            // Another device's access leaves the mapping's device writing.
            s.ok(&format!("set-access {va} {size} {read} {other}"));
            s.ok(&format!("write {va} 3 64"));
        }
        s.ok(&format!("set-access {va} {size} {read} {mine}"));
        assert!(!succeeds(&mut s, &format!("write {va} 5 64")), "{space}");
        s.ok(&format!("check {va} 3 64"));
        s.ok(&format!("set-access {va} {size} {rw} {mine}"));
        s.ok(&format!("write {va} 4 64"));
        s.ok(&format!("unmap {va}"));
        s.ok(&format!("release-address {va}"));
        s.ok(&format!("free-physical {h}"));
        s.exit();
    }
    root.assert_clean();
}

#[test]
fn peers_follow_the_physical_devices() {
    // DEVIPC_EMU_PEERS names physical devices: 2 and 3 are linked, 1 and 2 are not.
    let root = TestRoot::new("acl-visibility-peers");
    let env = |mask| {
        [
            ("DEVIPC_EMU_DEVICES", "4"),
            ("DEVIPC_EMU_PEERS", "2-3"),
            ("ASCEND_RT_VISIBLE_DEVICES", mask),
        ]
    };
    let mut a = root.spawn("linked", &env("3,2"));
    let mut b = root.spawn("unlinked", &env("1,2"));
    assert_eq!(a.val("can-access 0 1"), "1");
    assert_eq!(b.val("can-access 0 1"), "0");
    a.ok("set-device 0");
    a.ok("enable-peer 1");
    b.ok("set-device 0");
    b.fails(
        "enable-peer 1",
        devipc_ascend_sys::codes::ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
        rules::PEER_TOPOLOGY,
    );
    a.exit();
    b.exit();
    root.assert_clean();
}
