//! The backend against a scripted fake ACL runtime: a module with every function of the
//! list, turned into an `AclApi` with `acl_api_from_module!`. Each fake function records
//! its call, returns a code the test forced (or success) and writes plausible outputs, so
//! the tests see exactly which vendor calls the backend makes, in which order, and how it
//! maps their failures: start-up (`aclInit` repeat tolerated, `aclFinalize` only when
//! devipc initialised ACL, no device), error names and messages, optional symbols absent,
//! device binding and restoring, rollback after a failed step, the one-export rule, key
//! payloads, the notify timeout, and the staged copies of cross-device key imports.
//!
//! The fake keeps its state per thread (each test drives the backend from its own
//! thread). The process-wide `aclInit` accounting of the backend is keyed by the
//! runtime's `aclFinalize`, which every fake table shares, so every test is
//! `#[serial]`.
//!
//! [`fake`] is the runtime; this module holds what the tests share (a fresh table, the
//! recorded calls, forced failures, exported tokens); one module per topic holds the
//! tests, named like the backend's modules: [`startup`], [`vmm`], [`ipc_key`], [`copy`],
//! [`notify`], [`bounds`], [`lifetime`], [`hardening`].

use devipc_ascend::AscendBackend;
use devipc_ascend::sys::{AclApi, acl_api_from_module};
use devipc_core::{Allocation, DeviceId, DeviceIpc, DevicePtr, ExportOptions, MemToken};
use std::sync::Arc;

#[allow(
    non_snake_case,
    clippy::missing_safety_doc,
    reason = "the vendor's function and parameter names"
)]
mod fake;

mod bounds;
mod copy;
mod hardening;
mod ipc_key;
mod lifetime;
mod notify;
mod startup;
mod vmm;

/// A fresh fake runtime state for this thread, and a table over it.
fn fake_api() -> AclApi {
    fake::with(|s| *s = fake::Fake::default());
    // SAFETY: the `fake` module implements every listed function with the table's
    // exact prototype (a mismatch would not compile) and writes only the
    // out-parameters it is given.
    unsafe { acl_api_from_module!(fake) }
}

fn backend(api: AclApi) -> AscendBackend {
    AscendBackend::from_api(Arc::new(api)).expect("the fake runtime starts")
}

fn calls() -> Vec<String> {
    fake::with(|s| std::mem::take(&mut s.calls))
}

fn names(calls: &[String]) -> Vec<&str> {
    calls
        .iter()
        .map(|c| c.split('(').next().unwrap_or(c))
        .collect()
}

fn count(calls: &[String], name: &str) -> usize {
    names(calls).iter().filter(|n| **n == name).count()
}

fn fail(name: &'static str, code: i32) {
    fake::with(|s| {
        s.fail.insert(name, code);
    });
}

fn unfail(name: &'static str) {
    fake::with(|s| {
        s.fail.remove(name);
    });
}

fn fail_nth(name: &'static str, n: usize, code: i32) {
    fake::with(|s| {
        s.fail_nth.insert(name, (n, code));
        s.seen.remove(name);
    });
}

fn set_message(m: &str) {
    fake::with(|s| s.message = Some(std::ffi::CString::new(m).unwrap()));
}

/// An allocation of this backend on `device` and its token for the range 8192..12288 (the
/// fake runtime lets a process import its own export; the export writes the record an
/// import checks).
fn exported_vmm_token(b: &AscendBackend, device: DeviceId) -> (Allocation, MemToken) {
    let alloc = b.allocate(device, 1).unwrap();
    let token = b
        .export(&alloc, 8192..12288, ExportOptions::any_process())
        .unwrap();
    (alloc, token)
}

/// A key token of framework memory this backend exported on `device` (key "abc", an
/// `object_size` block; the fake lets a process import its own export, and the export
/// writes the record an import needs), narrowed to `offset..offset + len`.
fn exported_key_token(
    b: &AscendBackend,
    device: DeviceId,
    object_size: u64,
    offset: u64,
    len: u64,
) -> MemToken {
    const BLOCK: usize = 0x7100_0000;
    let size = object_size as usize;
    fake::with(|s| {
        // The runtime reports the block the key really names: here, what the test asks.
        s.key_import_size = size;
        s.block = (BLOCK, size);
        s.key = [0; 65];
        s.key[..3].copy_from_slice(b"abc");
    });
    let token = b
        .export_external(
            device,
            DevicePtr(BLOCK as u64),
            size,
            ExportOptions::any_process(),
        )
        .unwrap();
    calls();
    token.narrow(offset, len).unwrap()
}
