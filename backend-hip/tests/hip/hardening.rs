//! Findings of the 2026-11-28 audit on the HIP backend, each against the emulator in child
//! processes (this binary re-run on `hardening::child_role`) with their own state
//! directory, which must be left clean:
//!
//! - N4: a late `own_memory` unregister never drops another thread's block that got the
//!   same address (two threads allocating and freeing at once);
//! - N5: host copies of a `hip-vmm-fd` import on device 1 work from a thread whose device
//!   is 0 (the import's device is bound; the emulator's `hip.vmm.access-required`);
//! - N7: `export_external` of `hipMalloc` memory never calls
//!   `hipMemRetainAllocationHandle` (reported to crash ROCm 7.x before 7.12);
//! - N15: a token naming another producer than its lease's never makes the importer
//!   fetch a descriptor (`pidfd_getfd`) out of the process it names;
//! - N17: an export of a block freed and reallocated with another size without
//!   `close_external` is refused as "freed and reallocated";
//! - N18: the exporter's dma-buf fd is close-on-exec.

use std::ffi::c_void;

use crate::support::{backend, e2s, env, pattern};
use devipc_core::{
    AllocateOptions, DeviceId, DeviceIpc, DevicePtr, Error, ExportOptions, Mechanism, MemToken,
    ProcessId,
};
use devipc_hip::HipBackend;
use devipc_hip::sys::*;
use devipc_testkit::{Child, Parent, RawIo, TestRoot, child_entry, run_child};

/// The emulator's VMM granularity (2 MiB).
const G: usize = 2 << 20;

fn vmm() -> AllocateOptions {
    AllocateOptions::mechanism(Mechanism::HipVmmFd)
}

fn check(code: hipError_t, what: &str) -> Result<(), String> {
    if code == 0 {
        Ok(())
    } else {
        Err(format!("{what} failed with {code}"))
    }
}

#[test]
fn child_role() {
    run_child(|role, parent| match role {
        "legacy-export" => legacy_export(parent),
        "reallocated" => reallocated(parent),
        "exporter" => exporter(parent),
        "importer" => importer(parent),
        "forger" => forger(parent),
        "threads" => threads(parent),
        other => Err(format!("unknown role {other}")),
    });
}

// ---------------------------------------------------------------------------------------
// N7

/// `hipMalloc` memory through `export_external` (a pointer inside it): a `hip-ipc-mem`
/// token, without a single `hipMemRetainAllocationHandle` of that memory.
fn legacy_export(parent: &Parent) -> Result<(), String> {
    let b = backend()?;
    let api = devipc_emulator::hip::hip_api();
    let mut p: *mut c_void = std::ptr::null_mut();
    // SAFETY: a valid out pointer; device 0 is bound by default.
    check(unsafe { (api.hipMalloc)(&mut p, 1 << 20) }, "hipMalloc")?;
    let base = p as u64;
    let token = b
        .export_external(
            DeviceId(0),
            DevicePtr(base + 4096),
            4096,
            ExportOptions::default(),
        )
        .map_err(e2s)?;
    let retains = devipc_emulator::hip::retains_of_malloc_memory();
    if token.mechanism() != Mechanism::HipIpcMem || retains != 0 {
        return Err(format!(
            "a {} token, after {retains} hipMemRetainAllocationHandle of hipMalloc memory",
            token.mechanism()
        ));
    }
    b.close_external(DeviceId(0), DevicePtr(base))
        .map_err(e2s)?;
    // SAFETY: the block allocated above, no longer exported, freed once.
    check(unsafe { (api.hipFree)(p) }, "hipFree")?;
    parent.say("ok", "");
    Ok(())
}

/// At every version around the reported crashes (7.0 .. 7.11), and where the attribute
/// answers (7.12).
#[test]
fn export_external_of_hip_malloc_memory_never_retains_it() {
    for v in ["6.2", "7.0", "7.1", "7.12"] {
        let root = TestRoot::new(&format!("hardening-n7-{v}"));
        let envs = vec![("DEVIPC_EMU_HIP_VERSION", v.to_owned())];
        let mut child = Child::spawn(&child_entry(), "legacy-export", &root, &envs);
        child.expect("ok");
        child.wait_success();
        root.assert_emulator_clean();
    }
}

// ---------------------------------------------------------------------------------------
// N17

/// Raw VMM calls of a "framework" (PyTorch's expandable segments): one reservation whose
/// start is mapped to one handle, then to another of another size.
struct Segment {
    api: HipApi,
    prop: hipMemAllocationProp,
    va: *mut c_void,
    reserved: usize,
}

impl Segment {
    fn reserve(api: HipApi, reserved: usize) -> Result<Segment, String> {
        let prop = hipMemAllocationProp {
            r#type: hipMemAllocationTypePinned,
            requestedHandleType: hipMemHandleTypePosixFileDescriptor,
            location: hipMemLocation {
                r#type: hipMemLocationTypeDevice,
                id: 0,
            },
            ..hipMemAllocationProp::zeroed()
        };
        let mut va: *mut c_void = std::ptr::null_mut();
        // SAFETY: valid out pointer, NULL hint.
        let code = unsafe {
            (api.hipMemAddressReserve.expect("VMM"))(&mut va, reserved, 0, std::ptr::null_mut(), 0)
        };
        check(code, "hipMemAddressReserve")?;
        Ok(Segment {
            api,
            prop,
            va,
            reserved,
        })
    }

    /// A new handle of `size` bytes mapped at the reservation's start, read-write for
    /// device 0 (the version's property layout: 7.1 is not R0502).
    fn map(&self, size: usize) -> Result<hipMemGenericAllocationHandle_t, String> {
        let mut handle: hipMemGenericAllocationHandle_t = std::ptr::null_mut();
        // SAFETY: valid out pointer and property block (current layout, HIP 7.1).
        let code =
            unsafe { (self.api.hipMemCreate.expect("VMM"))(&mut handle, size, &self.prop, 0) };
        check(code, "hipMemCreate")?;
        // SAFETY: the handle just made, into the free start of the reservation.
        let code = unsafe { (self.api.hipMemMap.expect("VMM"))(self.va, size, 0, handle, 0) };
        check(code, "hipMemMap")?;
        let desc = hipMemAccessDesc {
            location: hipMemLocation {
                r#type: hipMemLocationTypeDevice,
                id: 0,
            },
            flags: hipMemAccessFlagsProtReadWrite,
        };
        // SAFETY: the mapping made above; one descriptor.
        let code = unsafe { (self.api.hipMemSetAccess.expect("VMM"))(self.va, size, &desc, 1) };
        check(code, "hipMemSetAccess")?;
        Ok(handle)
    }

    /// The framework's free of a mapping: unmap and release (the reservation stays).
    fn unmap(&self, handle: hipMemGenericAllocationHandle_t, size: usize) -> Result<(), String> {
        // SAFETY: the mapping and handle of `map`, released once.
        unsafe {
            check(
                (self.api.hipMemUnmap.expect("VMM"))(self.va, size),
                "hipMemUnmap",
            )?;
            check(
                (self.api.hipMemRelease.expect("VMM"))(handle),
                "hipMemRelease",
            )
        }
    }

    fn free(self) -> Result<(), String> {
        // SAFETY: the reservation of `reserve`, with nothing mapped, freed once.
        check(
            unsafe { (self.api.hipMemAddressFree.expect("VMM"))(self.va, self.reserved) },
            "hipMemAddressFree",
        )
    }
}

/// The framework frees an exported block (without `close_external`) and maps a block of
/// another size at the same address: its export is refused as freed and reallocated
/// (never served with the old block's lease and fd); once the stale export is closed the
/// new block exports.
fn reallocated(parent: &Parent) -> Result<(), String> {
    let b = backend()?;
    let seg = Segment::reserve(devipc_emulator::hip::hip_api(), 2 * G)?;
    let va = DevicePtr(seg.va as u64);
    let first = seg.map(G)?;
    let token = b
        .export_external(DeviceId(0), va, 4096, ExportOptions::default())
        .map_err(e2s)?;
    if token.mechanism() != Mechanism::HipVmmFd || token.object_size() != G as u64 {
        return Err(format!("first export: {token:?}"));
    }
    seg.unmap(first, G)?;
    let second = seg.map(2 * G)?;
    match b.export_external(DeviceId(0), va, 4096, ExportOptions::default()) {
        Err(e @ Error::InvalidArgument { .. })
            if e.to_string().contains("freed and reallocated") => {}
        other => {
            return Err(format!(
                "the export of a reallocated block of another size gave {:?}",
                other.map(|t| (t.generation(), t.object_size()))
            ));
        }
    }
    b.close_external(DeviceId(0), va).map_err(e2s)?;
    let again = b
        .export_external(DeviceId(0), va, 4096, ExportOptions::default())
        .map_err(e2s)?;
    if again.object_size() != 2 * G as u64 || again.generation() == token.generation() {
        return Err(format!("the new block's export: {again:?}"));
    }
    b.close_external(DeviceId(0), va).map_err(e2s)?;
    seg.unmap(second, 2 * G)?;
    seg.free()?;
    parent.say("ok", "");
    Ok(())
}

#[test]
fn a_block_reallocated_with_another_size_is_refused_as_freed_and_reallocated() {
    let root = TestRoot::new("hardening-n17");
    let envs = vec![("DEVIPC_EMU_HIP_VERSION", "7.1".to_owned())];
    let mut child = Child::spawn(&child_entry(), "reallocated", &root, &envs);
    child.expect("ok");
    child.wait_success();
    root.assert_emulator_clean();
}

// ---------------------------------------------------------------------------------------
// N5, N15, N18: an exporter of VMM memory and importers of its token.

/// Allocates VMM memory on `DEVICE`, writes pattern 3, says its token and whether its fd
/// is close-on-exec (N18), then waits for `exit`.
fn exporter(parent: &Parent) -> Result<(), String> {
    let b = backend()?;
    let device = DeviceId(env("DEVICE")?.parse().map_err(|e| format!("DEVICE: {e}"))?);
    let a = b.allocate_with(device, G, vmm()).map_err(e2s)?;
    b.write_raw(a.ptr, &pattern(3, 4096)).map_err(e2s)?;
    let token = b.export(&a, 0..G, ExportOptions::default()).map_err(e2s)?;
    // The payload's fd number (bytes 4..8, see backend-hip/src/vmm/payload.rs).
    let p = token.payload();
    let fd = i32::from_le_bytes([p[4], p[5], p[6], p[7]]);
    parent.say("cloexec", &cloexec(fd)?.to_string());
    parent.say("token", &token.to_text());
    parent.hear_exactly("exit")?;
    b.free(a).map_err(e2s)?;
    parent.say("done", "");
    Ok(())
}

/// Whether this process's `fd` is close-on-exec (`/proc/self/fdinfo`: `flags` in octal,
/// `O_CLOEXEC` is 0o2000000).
fn cloexec(fd: i32) -> Result<bool, String> {
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}"))
        .map_err(|e| format!("fdinfo of {fd}: {e}"))?;
    let flags = info
        .lines()
        .find_map(|l| l.strip_prefix("flags:"))
        .ok_or("no flags in fdinfo")?;
    let flags = u32::from_str_radix(flags.trim(), 8).map_err(|e| e.to_string())?;
    Ok(flags & 0o2000000 != 0)
}

/// Imports the token on `DEVICE` and reads it from this thread, whose device is 0.
fn importer(parent: &Parent) -> Result<(), String> {
    let b = backend()?;
    let device = DeviceId(env("DEVICE")?.parse().map_err(|e| format!("DEVICE: {e}"))?);
    let token: MemToken = parent.hear().parse().map_err(e2s)?;
    let mapping = b.import(&token, device).map_err(e2s)?;
    let mut got = vec![0u8; 4096];
    b.read_raw(mapping.ptr, &mut got).map_err(e2s)?;
    if got != pattern(3, 4096) {
        return Err("the import reads other bytes".into());
    }
    b.write_raw(mapping.ptr, &pattern(4, 64)).map_err(e2s)?;
    b.close(mapping).map_err(e2s)?;
    parent.say("ok", "");
    Ok(())
}

/// Imports a genuine token whose producer is replaced by this process's parent (a live
/// process, with its true start time): refused, without any `pidfd_getfd`.
fn forger(parent: &Parent) -> Result<(), String> {
    let b = backend()?;
    let token: MemToken = parent.hear().parse().map_err(e2s)?;
    let victim = std::os::unix::process::parent_id() as i32;
    let identity = devipc_shm::process::ProcessIdentity::of_pid(victim)
        .map_err(|e| e.to_string())?
        .ok_or("the parent is gone")?;
    let mut parts = token.to_parts();
    parts.origin.pid = ProcessId(victim as u32);
    parts.origin.start_time = identity.start_time;
    let forged = MemToken::new(parts).map_err(e2s)?;
    let before = HipBackend::fd_fetches();
    match b.import(&forged, DeviceId(0)) {
        Err(Error::InvalidToken { .. }) => {}
        Ok(m) => {
            let _ = b.close(m);
            return Err("a token naming another producer imported".into());
        }
        Err(other) => return Err(format!("the forged producer gave {other:?}")),
    }
    let fetched = HipBackend::fd_fetches() - before;
    if fetched != 0 {
        return Err(format!(
            "the import fetched {fetched} fd(s) from pid {victim} before refusing the token"
        ));
    }
    parent.say("ok", "");
    Ok(())
}

fn exporter_on(root: &TestRoot, device: u32) -> Child {
    let envs = vec![
        ("DEVIPC_EMU_HIP_VERSION", "7.1".to_owned()),
        ("DEVICE", device.to_string()),
    ];
    Child::spawn(&child_entry(), "exporter", root, &envs)
}

/// N5: exporter and importer on device 1; the importer's thread stays on device 0.
#[test]
fn a_vmm_import_on_device_one_is_copied_from_its_own_device() {
    if let Some(reason) = devipc_testkit::sibling_pidfd_getfd_refused() {
        devipc_testkit::skip(
            "a_vmm_import_on_device_one_is_copied_from_its_own_device",
            &reason,
        );
        return;
    }
    let root = TestRoot::new("hardening-n5");
    let mut exp = exporter_on(&root, 1);
    exp.expect("cloexec");
    let token = exp.expect("token");
    let envs = vec![
        ("DEVIPC_EMU_HIP_VERSION", "7.1".to_owned()),
        ("DEVICE", "1".to_owned()),
    ];
    let mut imp = Child::spawn(&child_entry(), "importer", &root, &envs);
    imp.send(&token);
    imp.expect("ok");
    imp.wait_success();
    assert_eq!(root.recorded_violations(), Vec::<String>::new());
    exp.send("exit");
    exp.expect("done");
    exp.wait_success();
    root.assert_emulator_clean();
}

/// N15 (and N18: the exporter's fd is close-on-exec).
#[test]
fn a_forged_producer_never_makes_the_importer_fetch_an_fd() {
    let root = TestRoot::new("hardening-n15");
    let mut exp = exporter_on(&root, 0);
    assert_eq!(
        exp.expect("cloexec"),
        "true",
        "the exported dma-buf fd is inheritable"
    );
    let token = exp.expect("token");
    let envs = vec![("DEVIPC_EMU_HIP_VERSION", "7.1".to_owned())];
    let mut forger = Child::spawn(&child_entry(), "forger", &root, &envs);
    forger.send(&token);
    forger.expect("ok");
    forger.wait_success();
    exp.send("exit");
    exp.expect("done");
    exp.wait_success();
    root.assert_emulator_clean();
}

// ---------------------------------------------------------------------------------------
// N4

/// Two threads allocate and free at once (VMM memory on device 1, and `hipMalloc`
/// memory), each checking that its live block stays registered as devipc's own, on its
/// device, until it frees it.
fn threads(parent: &Parent) -> Result<(), String> {
    let b = backend()?;
    let rounds: usize = env("ROUNDS")?.parse().map_err(|e| format!("ROUNDS: {e}"))?;
    let run = |vmm_memory: bool| -> Result<(), String> {
        for _ in 0..rounds {
            let (device, a) = if vmm_memory {
                (DeviceId(1), b.allocate_with(DeviceId(1), G, vmm()))
            } else {
                (DeviceId(0), b.allocate(DeviceId(0), 64 << 10))
            };
            let a = a.map_err(e2s)?;
            for _ in 0..3 {
                std::thread::yield_now();
                let found = devipc_core::own_memory::overlapping(a.ptr.0..a.ptr.0 + 1);
                if found != Some((a.ptr, a.size, device)) {
                    return Err(format!(
                        "the live block at {} is registered as {found:?}",
                        a.ptr
                    ));
                }
            }
            b.free(a).map_err(e2s)?;
        }
        Ok(())
    };
    let (first, second) = std::thread::scope(|s| {
        let both = [
            s.spawn(|| run(true)),
            s.spawn(|| run(false)),
            s.spawn(|| run(false)),
        ];
        let mut results = both.map(|h| h.join().unwrap_or_else(|_| Err("panicked".into())));
        (
            std::mem::replace(&mut results[0], Ok(())),
            results.into_iter().collect::<Result<Vec<_>, _>>(),
        )
    });
    first?;
    second?;
    parent.say("ok", "");
    Ok(())
}

#[test]
fn a_block_freed_on_one_thread_never_unregisters_a_new_one_at_its_address() {
    let root = TestRoot::new("hardening-n4");
    let envs = vec![
        ("DEVIPC_EMU_HIP_VERSION", "7.1".to_owned()),
        ("ROUNDS", "4000".to_owned()),
    ];
    let mut child = Child::spawn(&child_entry(), "threads", &root, &envs);
    child.expect("ok");
    child.wait_success();
    root.assert_emulator_clean();
}
