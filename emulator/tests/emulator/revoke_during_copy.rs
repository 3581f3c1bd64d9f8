//! A revocation during a copy fails the copy with the vendor's code; it never faults the
//! copier (audit N14).
//!
//! The emulator revokes memory that its owner frees while another process still maps it
//! (HIP `hipFree` under an open IPC handle, Ascend `aclrtFree` under a live key import) by
//! truncating the segment, so every later access through a mapping would raise `SIGBUS`.
//! Copies check the segment first; the check and the copy used to be two steps, and a
//! truncation in between killed the copier with `SIGBUS`. Here a copier process copies a
//! large block in a loop while the owner frees it; the copier must stop with the vendor's
//! code (`hipErrorIllegalAddress`, `ACL_ERROR_RT_SYS_DMA`) and exit normally, for
//! [`ROUNDS`] owner/copier pairs per vendor.

use std::ffi::{c_char, c_int, c_void};
use std::os::unix::process::ExitStatusExt;
use std::ptr;
use std::time::{Duration, Instant};

use devipc_ascend_sys::codes::ACL_ERROR_RT_SYS_DMA;
use devipc_ascend_sys::consts::ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION;
use devipc_ascend_sys::types::{ACL_MEMCPY_DEVICE_TO_HOST, aclrtMemcpyKind};
use devipc_hip_sys::consts::{
    hipErrorIllegalAddress, hipMemcpyDeviceToHost, ipc_mem_lazy_enable_peer_access,
};
use devipc_hip_sys::types::hipIpcMemHandle_t;
use devipc_testkit::{Child, Parent, TestRoot};

use crate::emu_support::{child_entry, hex, unhex64};

/// Bytes copied per call: large enough that a copy takes milliseconds, so the free lands
/// inside one.
const LEN: usize = 32 << 20;
/// Owner/copier pairs per vendor.
const ROUNDS: u32 = 3;
/// How long the copier copies before the owner frees.
const HEAD_START: Duration = Duration::from_millis(60);

#[test]
fn child_role() {
    devipc_testkit::run_child(|role, parent| match role {
        "hip-owner" => hip_owner(parent),
        "hip-copier" => hip_copier(parent),
        "acl-owner" => acl_owner(parent),
        "acl-copier" => acl_copier(parent),
        other => Err(format!("unknown role {other}")),
    });
}

/// Copies `copy` in a loop until it fails (or a minute passed); reports
/// `<copies> <code>`.
fn copy_until_failure(parent: &Parent, mut copy: impl FnMut() -> i64) {
    parent.say("copying", "");
    let started = Instant::now();
    let mut copies = 0u64;
    let code = loop {
        let code = copy();
        if code != 0 || started.elapsed() > Duration::from_secs(60) {
            break code;
        }
        copies += 1;
    };
    parent.say("stopped", &format!("{copies} {code}"));
}

fn hip_owner(parent: &Parent) -> Result<(), String> {
    let api = devipc_emulator::hip_api();
    let mut p: *mut c_void = ptr::null_mut();
    let mut h = hipIpcMemHandle_t::zeroed();
    // SAFETY: valid out-pointers; the emulator checks every handle and pointer.
    unsafe {
        check((api.hipSetDevice)(0))?;
        check((api.hipMalloc)(&mut p, LEN))?;
        check((api.hipIpcGetMemHandle)(&mut h, p))?;
    }
    parent.say("handle", &hex(&h.to_bytes()));
    parent.hear_exactly("free")?;
    // SAFETY: the allocation made above.
    let code = unsafe { (api.hipFree)(p) };
    parent.say("freed", &code.to_string());
    parent.hear_exactly("exit")
}

fn hip_copier(parent: &Parent) -> Result<(), String> {
    let api = devipc_emulator::hip_api();
    let bytes = unhex64(&parent.hear());
    let mut version: c_int = 0;
    let mut p: *mut c_void = ptr::null_mut();
    // SAFETY: valid out-pointers; the handle is passed by value.
    unsafe {
        check((api.hipSetDevice)(0))?;
        check((api.hipRuntimeGetVersion)(&mut version))?;
        check((api.hipIpcOpenMemHandle)(
            &mut p,
            hipIpcMemHandle_t::from_bytes(bytes),
            ipc_mem_lazy_enable_peer_access(version),
        ))?;
    }
    let mut host = vec![0u8; LEN];
    copy_until_failure(parent, || {
        // SAFETY: `host` holds LEN bytes; the device pointer is checked by the emulator.
        i64::from(unsafe {
            (api.hipMemcpy)(host.as_mut_ptr().cast(), p, LEN, hipMemcpyDeviceToHost)
        })
    });
    // SAFETY: the mapping opened above.
    check(unsafe { (api.hipIpcCloseMemHandle)(p) })?;
    parent.hear_exactly("exit")
}

fn acl_owner(parent: &Parent) -> Result<(), String> {
    let api = devipc_emulator::acl_api();
    let export = api.aclrtIpcMemGetExportKey.ok_or("no key export")?;
    let close = api.aclrtIpcMemClose.ok_or("no key close")?;
    let mut p: *mut c_void = ptr::null_mut();
    let mut key = [0 as c_char; 65];
    // SAFETY: valid out-pointers; the emulator checks every pointer.
    unsafe {
        check((api.aclrtSetDevice)(0))?;
        check((api.aclrtMalloc)(&mut p, LEN, 0))?;
        check(export(
            p,
            LEN,
            key.as_mut_ptr(),
            key.len(),
            ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION,
        ))?;
    }
    let text: Vec<u8> = key
        .iter()
        .take_while(|c| **c != 0)
        .map(|c| *c as u8)
        .collect();
    parent.say("handle", &String::from_utf8_lossy(&text));
    parent.hear_exactly("free")?;
    // SAFETY: the allocation made above.
    let code = unsafe { (api.aclrtFree)(p) };
    parent.say("freed", &code.to_string());
    parent.hear_exactly("exit")?;
    // SAFETY: the key exported above, NUL-terminated.
    check(unsafe { close(key.as_ptr()) })
}

fn acl_copier(parent: &Parent) -> Result<(), String> {
    let api = devipc_emulator::acl_api();
    let import = api.aclrtIpcMemImportByKey.ok_or("no key import")?;
    let close = api.aclrtIpcMemClose.ok_or("no key close")?;
    let mut key = [0 as c_char; 65];
    for (slot, b) in key.iter_mut().zip(parent.hear().bytes().take(64)) {
        *slot = b as c_char;
    }
    let mut p: *mut c_void = ptr::null_mut();
    // SAFETY: valid out-pointer, NUL-terminated key.
    unsafe {
        check((api.aclrtSetDevice)(0))?;
        check(import(&mut p, key.as_ptr(), 0))?;
    }
    let mut host = vec![0u8; LEN];
    let kind: aclrtMemcpyKind = ACL_MEMCPY_DEVICE_TO_HOST;
    copy_until_failure(parent, || {
        // SAFETY: `host` holds LEN bytes; the device pointer is checked by the emulator.
        i64::from(unsafe { (api.aclrtMemcpy)(host.as_mut_ptr().cast(), LEN, p, LEN, kind) })
    });
    // SAFETY: the key imported above.
    check(unsafe { close(key.as_ptr()) })?;
    parent.hear_exactly("exit")
}

fn check(code: impl Into<i64>) -> Result<(), String> {
    match code.into() {
        0 => Ok(()),
        c => Err(format!("vendor call failed with {c}")),
    }
}

/// One owner/copier pair: the copier must stop with `expected` and exit normally.
fn revoke_during_copies(vendor: &str, expected: i64) {
    for round in 0..ROUNDS {
        let root = TestRoot::new(&format!("revoke-copy-{vendor}-{round}"));
        let spawn = |role: &str| Child::build(&child_entry(), role, &root).spawn();
        let mut owner = spawn(&format!("{vendor}-owner"));
        let mut copier = spawn(&format!("{vendor}-copier"));
        copier.send(&owner.expect("handle"));
        copier.expect("copying");
        std::thread::sleep(HEAD_START);
        owner.send("free");
        assert_eq!(owner.expect("freed"), "0", "{vendor}: the free itself");
        // The copier's report, or `None` when it died first.
        let stopped = std::iter::from_fn(|| copier.next_message())
            .find(|(key, _)| key == "stopped")
            .map(|(_, value)| value);
        if stopped.is_some() {
            copier.send("exit");
        }
        let status = copier.wait();
        assert_eq!(
            status.signal(),
            None,
            "{vendor} round {round}: the copier died of signal {:?} (SIGBUS is {}): a \
             revocation faulted a copy instead of failing it",
            status.signal(),
            libc::SIGBUS
        );
        let stopped = stopped.unwrap_or_else(|| panic!("{vendor}: the copier exited: {status}"));
        let (copies, code) = stopped.split_once(' ').unwrap();
        eprintln!("{vendor} round {round}: {copies} copies, then {code}");
        assert_eq!(
            code.parse::<i64>().unwrap(),
            expected,
            "{vendor}: {stopped}"
        );
        assert!(status.success(), "{vendor}: copier {status}");
        owner.send("exit");
        assert!(owner.wait().success());
    }
}

#[test]
fn hip_free_during_copies_fails_them_without_a_fault() {
    revoke_during_copies("hip", i64::from(hipErrorIllegalAddress));
}

#[test]
fn acl_free_during_copies_fails_them_without_a_fault() {
    revoke_during_copies("acl", i64::from(ACL_ERROR_RT_SYS_DMA));
}
