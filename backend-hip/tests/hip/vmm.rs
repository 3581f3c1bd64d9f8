//! The `hip-vmm-fd` mechanism on the emulator, across real processes, at HIP 6.2, 7.0
//! (import takes a pointer to the fd) and 7.1 (the fd by value): VMM memory made by
//! `allocate_with` or by the "framework" with raw VMM calls (`export_external`), imported
//! with `pidfd_getfd` or with the fd passed over a Unix socket (`import_fd`); bytes both
//! ways; both close orders (an exporter's free waits for the importer); replayed and
//! forged tokens refused; a killed exporter reclaimed; legacy memory keeps `hip-ipc-mem`;
//! runtimes before 6.2 refuse with a typed `Unsupported`.
//!
//! Each test runs its roles in child processes (devipc-testkit) with their own emulator
//! state directory and checks that nothing is left behind.

use std::ffi::{c_int, c_void};
use std::os::fd::{AsFd, OwnedFd};

use crate::support::{backend, e2s, env, num, pattern};
use devipc_core::{
    AllocateOptions, DeviceId, DeviceIpc, DevicePtr, Error, ExportOptions, Mechanism, MemToken,
};
use devipc_hip::sys::*;
use devipc_testkit::{Child, Parent, RawIo, TestRoot, child_entry, run_child};

/// The emulator's VMM granularity (2 MiB).
const G: usize = 2 << 20;
/// What the tests ask `allocate_with` for: rounded up to one granule.
const REQUEST: usize = (1 << 20) + 5;
const VERSIONS: [&str; 3] = ["6.2", "7.0", "7.1"];

fn vmm() -> AllocateOptions {
    AllocateOptions::mechanism(Mechanism::HipVmmFd)
}

// ---------------------------------------------------------------------------------------
// "Framework" memory: VMM memory made with the raw calls, as PyTorch's expandable
// segments do, which devipc only sees as a pointer.

struct Framework {
    api: HipApi,
    handles: Vec<hipMemGenericAllocationHandle_t>,
    va: u64,
    /// Bytes per handle; the reservation holds them back to back.
    size: usize,
}

fn check(code: hipError_t, what: &str) -> Result<(), String> {
    if code == 0 {
        Ok(())
    } else {
        Err(format!("{what} failed with {code}"))
    }
}

impl Framework {
    /// `size` bytes (a multiple of the granularity) on device 0, exportable as an fd when
    /// `exportable`, read-write for device 0.
    fn create(size: usize, exportable: bool) -> Result<Framework, String> {
        Framework::create_n(size, 1, exportable)
    }

    /// `n` allocations of `size` bytes mapped back to back in one reservation, as a
    /// caching allocator's expandable segment grows.
    fn create_n(size: usize, n: usize, exportable: bool) -> Result<Framework, String> {
        let api = devipc_emulator::hip::hip_api();
        let mut version: c_int = 0;
        // SAFETY: a valid out pointer.
        let code = unsafe { (api.hipRuntimeGetVersion)(&mut version) };
        check(code, "hipRuntimeGetVersion")?;
        let prop = hipMemAllocationProp {
            r#type: hipMemAllocationTypePinned,
            requestedHandleType: if exportable {
                hipMemHandleTypePosixFileDescriptor
            } else {
                hipMemHandleTypeNone
            },
            location: hipMemLocation {
                r#type: hipMemLocationTypeDevice,
                id: 0,
            },
            ..hipMemAllocationProp::zeroed()
        };
        let old = hipMemAllocationProp_R0502::from_current(&prop);
        let prop_ptr: *const hipMemAllocationProp = if mem_allocation_prop_is_r0502(version) {
            (&old as *const hipMemAllocationProp_R0502).cast()
        } else {
            &prop
        };
        let total = size * n;
        let mut va: *mut c_void = std::ptr::null_mut();
        let reserve = api.hipMemAddressReserve.expect("VMM");
        // SAFETY: valid out pointer, NULL hint.
        let code = unsafe { reserve(&mut va, total, 0, std::ptr::null_mut(), 0) };
        check(code, "hipMemAddressReserve")?;
        let mut handles = Vec::new();
        for i in 0..n {
            let mut handle: hipMemGenericAllocationHandle_t = std::ptr::null_mut();
            let create = api.hipMemCreate.expect("VMM");
            // SAFETY: valid out pointer and property block in the version's layout.
            let code = unsafe { create(&mut handle, size, prop_ptr, 0) };
            check(code, "hipMemCreate")?;
            let at = (va as usize + i * size) as *mut c_void;
            // SAFETY: the handle and a free part of the reservation made above.
            let code = unsafe { (api.hipMemMap.expect("VMM"))(at, size, 0, handle, 0) };
            check(code, "hipMemMap")?;
            handles.push(handle);
        }
        let desc = hipMemAccessDesc {
            location: hipMemLocation {
                r#type: hipMemLocationTypeDevice,
                id: 0,
            },
            flags: hipMemAccessFlagsProtReadWrite,
        };
        // SAFETY: the mappings made above (a run of whole mappings); one descriptor.
        let code = unsafe { (api.hipMemSetAccess.expect("VMM"))(va, total, &desc, 1) };
        check(code, "hipMemSetAccess")?;
        Ok(Framework {
            api,
            handles,
            va: va as u64,
            size,
        })
    }

    /// The framework's own free: unmap, address free, release.
    fn free(self) -> Result<(), String> {
        let va = self.va as *mut c_void;
        let total = self.size * self.handles.len();
        // SAFETY: the mappings, reservation and handles of `create_n`, released once.
        unsafe {
            check(
                (self.api.hipMemUnmap.expect("VMM"))(va, total),
                "hipMemUnmap",
            )?;
            check(
                (self.api.hipMemAddressFree.expect("VMM"))(va, total),
                "hipMemAddressFree",
            )?;
            for h in self.handles {
                check((self.api.hipMemRelease.expect("VMM"))(h), "hipMemRelease")?;
            }
            Ok(())
        }
    }
}

// ---------------------------------------------------------------------------------------
// Child roles.

#[test]
fn child_role() {
    run_child(|role, parent| match role {
        "exporter" => exporter(parent),
        "importer" => importer(parent),
        "forger" => forger(parent),
        "local" => local(parent),
        "device-one" => device_one(parent),
        "old-runtime" => old_runtime(parent),
        other => Err(format!("unknown role {other}")),
    });
}

/// Makes VMM memory (`MODE=alloc`: `allocate_with`; `MODE=external`: framework memory +
/// `export_external` of the pointer at OFFSET), writes pattern 1, exports
/// `OFFSET..OFFSET+LEN`, then serves the parent's commands.
fn exporter(parent: &Parent) -> Result<(), String> {
    let b = backend()?;
    let (offset, len) = (num("OFFSET")?, num("LEN")?);
    let mode = env("MODE")?;
    // external2: the block is the second of two allocations in one reservation.
    let external = mode.starts_with("external");
    let second = mode == "external2";
    let mut alloc = None;
    let mut framework = None;
    let (base, token) = if external {
        let fw = Framework::create_n(G, if second { 2 } else { 1 }, true)?;
        let base = if second {
            // Other bytes in the first: an import of the wrong allocation shows.
            b.write_raw(DevicePtr(fw.va), &pattern(7, G)).map_err(e2s)?;
            fw.va + G as u64
        } else {
            fw.va
        };
        b.write_raw(DevicePtr(base), &pattern(1, G)).map_err(e2s)?;
        let token = b
            .export_external(
                DeviceId(0),
                DevicePtr(base + offset as u64),
                len,
                ExportOptions::default(),
            )
            .map_err(e2s)?;
        framework = Some(fw);
        (base, token)
    } else {
        let a = b.allocate_with(DeviceId(0), REQUEST, vmm()).map_err(e2s)?;
        if a.size != G {
            return Err(format!(
                "{REQUEST} bytes became {}, not one granule",
                a.size
            ));
        }
        b.write_raw(a.ptr, &pattern(1, G)).map_err(e2s)?;
        let token = b
            .export(&a, offset..offset + len, ExportOptions::default())
            .map_err(e2s)?;
        let base = a.ptr.0;
        alloc = Some(a);
        (base, token)
    };
    if token.mechanism() != Mechanism::HipVmmFd
        || token.offset() != offset as u64
        || token.len() != len as u64
        || token.object_size() != G as u64
    {
        return Err(format!(
            "token {} range {}+{} of {}",
            token.mechanism(),
            token.offset(),
            token.len(),
            token.object_size()
        ));
    }
    b.grant(&token, &[]).map_err(e2s)?;
    // The fd is there to be sent while exported.
    drop(b.export_fd(&token).map_err(e2s)?);
    parent.say("token", &token.to_text());
    loop {
        let line = parent.hear();
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.first().copied().unwrap_or("") {
            "check" => {
                let mut got = vec![0u8; 64];
                b.read_raw(DevicePtr(base + offset as u64 + 100), &mut got)
                    .map_err(e2s)?;
                if got != pattern(2, 64) {
                    return Err("the importer's bytes did not arrive".into());
                }
                parent.say("checked", "");
            }
            // send <socket path>: the fd over a Unix socket (SCM_RIGHTS).
            "send" => {
                let stream = std::os::unix::net::UnixStream::connect(words[1])
                    .map_err(|e| format!("connect {}: {e}", words[1]))?;
                let fd = b.export_fd(&token).map_err(e2s)?;
                devipc_shm::os::send_with_fds(&stream, b"f", &[fd.as_fd()])
                    .map_err(|e| format!("send_with_fds: {e}"))?;
                parent.say("sent", "");
            }
            "free" => {
                if let Some(a) = alloc.take() {
                    b.free(a).map_err(e2s)?;
                    parent.say("freed", &b.deferred_frees().to_string());
                } else {
                    let ptr = DevicePtr(base + offset as u64);
                    match b.close_external(DeviceId(0), ptr) {
                        Ok(()) => {
                            framework.take().ok_or("freed twice")?.free()?;
                            parent.say("freed", "ok");
                        }
                        Err(Error::InvalidArgument { what }) if what.contains("still") => {
                            parent.say("freed", "busy")
                        }
                        Err(e) => return Err(e2s(e)),
                    }
                }
            }
            "export-fd" => match b.export_fd(&token) {
                Ok(_) => parent.say("export-fd", "ok"),
                Err(e) => parent.say("export-fd", &format!("refused: {e}")),
            },
            "count" => parent.say("count", &b.deferred_frees().to_string()),
            "exit" => return Ok(()),
            other => return Err(format!("unexpected {other:?}")),
        }
    }
}

/// Imports the token (`PATHWAY=pidfd`: `import`; `PATHWAY=socket`: the fd received on the
/// socket `SOCK`, then `import_fd`), checks pattern 1, writes pattern 2 at +100, then
/// serves the parent's commands.
fn importer(parent: &Parent) -> Result<(), String> {
    let b = backend()?;
    let token: MemToken = parent.hear().parse().map_err(e2s)?;
    let socket = env("PATHWAY")? == "socket";
    let device = DeviceId(num("DEVICE").unwrap_or(0) as u32);
    // The socket pathway keeps a copy of the fd to replay the token with it later.
    let mut kept: Option<OwnedFd> = None;
    let mapping = if socket {
        let path = env("SOCK")?;
        let listener = std::os::unix::net::UnixListener::bind(&path)
            .map_err(|e| format!("bind {path}: {e}"))?;
        parent.say("listening", "");
        let (stream, _) = listener.accept().map_err(|e| format!("accept: {e}"))?;
        let (_, mut fds) = devipc_shm::os::recv_with_fds(&stream, &mut [0u8; 1])
            .map_err(|e| format!("recv_with_fds: {e}"))?;
        let fd = fds.pop().ok_or("no fd arrived")?;
        kept = Some(fd.try_clone().map_err(|e| e.to_string())?);
        b.import_fd(&token, fd, device).map_err(e2s)?
    } else {
        b.import(&token, device).map_err(e2s)?
    };
    let offset = token.offset() as usize;
    if mapping.object_size != G || mapping.len != token.len() as usize {
        return Err(format!(
            "mapping of {} bytes in an object of {}",
            mapping.len, mapping.object_size
        ));
    }
    let ptr = mapping.ptr;
    let check_bytes = |own: bool| -> Result<(), String> {
        let mut got = vec![0u8; 64];
        b.read_raw(ptr, &mut got).map_err(e2s)?;
        if got != pattern(1, G)[offset..offset + 64] {
            return Err(format!("imported bytes differ at offset {offset}"));
        }
        if own {
            b.read_raw(ptr.offset(100).map_err(e2s)?, &mut got)
                .map_err(e2s)?;
            if got != pattern(2, 64) {
                return Err("our own bytes are gone".into());
            }
        }
        Ok(())
    };
    check_bytes(false)?;
    b.write_raw(mapping.ptr.offset(100).map_err(e2s)?, &pattern(2, 64))
        .map_err(e2s)?;
    parent.say("wrote", "");
    let mut mapping = Some(mapping);
    loop {
        match parent.hear().as_str() {
            "read" => {
                check_bytes(true)?;
                parent.say("read-ok", "");
            }
            "close" => {
                let m = mapping.take().ok_or("closed twice")?;
                b.close(m.clone()).map_err(e2s)?;
                match b.close(m) {
                    Err(Error::UnknownHandle {
                        kind: "mapping", ..
                    }) => {}
                    other => return Err(format!("double close gave {other:?}")),
                }
                parent.say("closed", "");
            }
            "import-again" => {
                let again = match &kept {
                    Some(fd) => {
                        b.import_fd(&token, fd.try_clone().map_err(|e| e.to_string())?, device)
                    }
                    None => b.import(&token, device),
                };
                match again {
                    Ok(m) => {
                        let _ = b.close(m);
                        return Err("a token replayed after the free imported".into());
                    }
                    Err(e) => parent.say("refused", &e2s(e)),
                }
            }
            "exit" => return Ok(()),
            other => return Err(format!("unexpected {other:?}")),
        }
    }
}

/// Tries forged variants of a genuine token (range beyond the real object, another fd
/// number or identity, another generation, producer or lease, a wrong fd), each refused
/// with no lease hold left; then the genuine token imports.
fn forger(parent: &Parent) -> Result<(), String> {
    let b = backend()?;
    let token: MemToken = parent.hear().parse().map_err(e2s)?;
    let genuine = token.to_parts();
    // The payload's fields (see backend-hip/src/vmm/payload.rs): fd @4, st_dev @8, st_ino @16,
    // lease @24.
    let lease_name = genuine.payload[24..].to_vec();
    let edit = |f: &dyn Fn(&mut devipc_core::token::MemTokenParts)| -> Result<MemToken, String> {
        let mut parts = token.to_parts();
        f(&mut parts);
        MemToken::new(parts).map_err(e2s)
    };
    let stranger = devipc_shm::lease::held::create_bound(genuine.generation).map_err(e2s)?;
    let cases: Vec<(&str, MemToken, &str)> = vec![
        (
            "a range past the real object",
            edit(&|p| {
                p.object_size = 2 * G as u64;
                p.len = 2 * G as u64;
            })?,
            "InvalidToken",
        ),
        (
            "an offset past the real object",
            edit(&|p| {
                p.object_size = 2 * G as u64;
                p.offset = G as u64;
                p.len = 16;
            })?,
            "InvalidToken",
        ),
        (
            "another file identity",
            edit(&|p| p.payload[16] ^= 1)?,
            "InvalidToken",
        ),
        (
            "another open fd of the exporter",
            edit(&|p| p.payload[4..8].copy_from_slice(&0i32.to_le_bytes()))?,
            "InvalidToken",
        ),
        (
            "a closed fd number",
            edit(&|p| p.payload[4..8].copy_from_slice(&999i32.to_le_bytes()))?,
            "InvalidArgument",
        ),
        (
            "another generation",
            edit(&|p| p.generation += 1)?,
            "InvalidToken",
        ),
        // Refused by the lease's producer binding, before any pidfd_getfd (audit N15).
        (
            "another producer start time",
            edit(&|p| p.origin.start_time += 1)?,
            "InvalidToken",
        ),
        (
            "another process's lease",
            edit(&|p| p.payload[24..].copy_from_slice(stranger.name()))?,
            "InvalidToken",
        ),
    ];
    let kind = |e: &Error| match e {
        Error::InvalidToken { .. } => "InvalidToken",
        Error::InvalidArgument { .. } => "InvalidArgument",
        _ => "other",
    };
    for (what, forged, want) in &cases {
        match b.import(forged, DeviceId(0)) {
            Err(e) if kind(&e) == *want => {}
            other => return Err(format!("{what}: {other:?}, want {want}")),
        }
    }
    // A wrong fd beside the genuine token.
    let wrong: OwnedFd = std::fs::File::open("/dev/null")
        .map_err(|e| e.to_string())?
        .into();
    match b.import_fd(&token, wrong, DeviceId(0)) {
        Err(Error::InvalidToken { .. }) => {}
        other => return Err(format!("a wrong fd: {other:?}")),
    }
    let lease = devipc_shm::lease::held::reopen(&lease_name).map_err(e2s)?;
    if lease.live_holders() != 0 {
        return Err("a refused import kept a lease hold".into());
    }
    stranger.remove().map_err(|e| e.to_string())?;
    let mapping = b.import(&token, DeviceId(0)).map_err(e2s)?;
    let mut got = vec![0u8; 64];
    b.read_raw(mapping.ptr, &mut got).map_err(e2s)?;
    if got != pattern(1, 64) {
        return Err("the genuine import reads other bytes".into());
    }
    if lease.live_holders() != 1 {
        return Err("the genuine import holds no lease".into());
    }
    b.close(mapping).map_err(e2s)?;
    parent.say("ok", "");
    Ok(())
}

/// VMM memory on device 1 is written and read from a thread whose device is 0: host
/// copies run on the owner's device, which has access (the others were never granted).
fn device_one(parent: &Parent) -> Result<(), String> {
    let b = backend()?;
    let a = b.allocate_with(DeviceId(1), G, vmm()).map_err(e2s)?;
    b.write_raw(a.ptr, &pattern(5, 4096)).map_err(e2s)?;
    let mut got = vec![0u8; 4096];
    b.read_raw(a.ptr, &mut got).map_err(e2s)?;
    if got != pattern(5, 4096) {
        return Err("device 1's VMM bytes did not round-trip".into());
    }
    b.free(a).map_err(e2s)?;
    parent.say("ok", "");
    Ok(())
}

/// One process: the default stays legacy, legacy memory through export_external stays
/// hip-ipc-mem, VMM memory exports as hip-vmm-fd, and the argument checks.
fn local(parent: &Parent) -> Result<(), String> {
    let b = backend()?;
    b.vmm_fd_support().map_err(e2s)?;
    // The capabilities say so too; the fabric probe (one granule created for a fabric
    // export, released again) finds none on the emulator and leaves nothing behind (the
    // parent checks the state directory).
    let caps = b.info().capabilities;
    if !caps.vmm_fd || caps.vmm_fabric {
        return Err(format!(
            "capabilities vmm_fd={} vmm_fabric={}",
            caps.vmm_fd, caps.vmm_fabric
        ));
    }
    let legacy = b
        .allocate_with(DeviceId(0), 4096, AllocateOptions::default())
        .map_err(e2s)?;
    let t = b
        .export(&legacy, 0..4096, ExportOptions::default())
        .map_err(e2s)?;
    if t.mechanism() != Mechanism::HipIpcMem {
        return Err(format!(
            "the default allocation exported as {}",
            t.mechanism()
        ));
    }
    // A framework's hipMalloc block (devipc's own allocations are refused there), which
    // only exports under its own device.
    let block = b.framework_malloc(DeviceId(0), 4096).map_err(e2s)?;
    match b.export_external(DeviceId(1), block, 64, ExportOptions::default()) {
        Err(Error::InvalidArgument { what }) if what.contains("not of device 1") => {}
        other => {
            return Err(format!(
                "a device-0 block exported under device 1: {other:?}"
            ));
        }
    }
    let t = b
        .export_external(
            DeviceId(0),
            block.offset(100).map_err(e2s)?,
            64,
            ExportOptions::default(),
        )
        .map_err(e2s)?;
    if t.mechanism() != Mechanism::HipIpcMem || t.offset() != 100 {
        return Err(format!(
            "hipMalloc memory through export_external: {} at {}",
            t.mechanism(),
            t.offset()
        ));
    }
    match b.export_fd(&t) {
        Err(Error::BackendMismatch { .. }) => {}
        other => return Err(format!("export_fd of a hip-ipc-mem token: {other:?}")),
    }
    b.close_external(DeviceId(0), block).map_err(e2s)?;
    // SAFETY: `block` came from framework_malloc on device 0 and is freed once, here.
    unsafe { b.framework_free(DeviceId(0), block) }.map_err(e2s)?;
    b.free(legacy).map_err(e2s)?;

    let a = b.allocate_with(DeviceId(0), 1, vmm()).map_err(e2s)?;
    let token = b
        .export(&a, 10..20, ExportOptions::default())
        .map_err(e2s)?;
    if token.mechanism() != Mechanism::HipVmmFd {
        return Err(format!("VMM memory exported as {}", token.mechanism()));
    }
    let fd = b.export_fd(&token).map_err(e2s)?;
    match b.import(&token, DeviceId(0)) {
        Err(Error::Unsupported { what, .. }) if what.contains("process that exported it") => {}
        other => return Err(format!("own import gave {other:?}")),
    }
    match b.import_fd(&token, fd, DeviceId(0)) {
        Err(Error::Unsupported { .. }) => {}
        other => return Err(format!("own import_fd gave {other:?}")),
    }
    match b.export(&a, 0..G + 1, ExportOptions::default()) {
        Err(Error::InvalidArgument { .. }) => {}
        other => return Err(format!("a range past the end gave {other:?}")),
    }
    match b.allocate_with(DeviceId(0), 0, vmm()) {
        Err(Error::InvalidArgument { .. }) => {}
        other => return Err(format!("0 bytes gave {other:?}")),
    }
    match b.allocate_with(DeviceId(9), G, vmm()) {
        Err(Error::InvalidDevice { .. }) => {}
        other => return Err(format!("device 9 gave {other:?}")),
    }
    match b.allocate_with(
        DeviceId(0),
        G,
        AllocateOptions::mechanism(Mechanism::AscendVmm),
    ) {
        Err(Error::Unsupported { .. }) => {}
        other => return Err(format!("an Ascend mechanism gave {other:?}")),
    }
    // VMM memory the framework made without asking for a POSIX fd cannot be exported.
    let fw = Framework::create(G, false)?;
    match b.export_external(DeviceId(0), DevicePtr(fw.va), 64, ExportOptions::default()) {
        Err(Error::Unsupported { what, .. }) if what.contains("PosixFileDescriptor") => {}
        other => return Err(format!("a non-exportable VMM block gave {other:?}")),
    }
    fw.free()?;
    b.free(a.clone()).map_err(e2s)?;
    match b.export_fd(&token) {
        Err(Error::InvalidArgument { what }) if what.contains("no longer exports") => {}
        other => return Err(format!("export_fd after the free gave {other:?}")),
    }
    match b.free(a) {
        Err(Error::UnknownHandle { .. }) => {}
        other => return Err(format!("double free gave {other:?}")),
    }
    parent.say("ok", "");
    Ok(())
}

/// Before ROCm 6.2: allocate_with(HipVmmFd) and export_external of VMM memory are a typed
/// Unsupported naming the version; the default allocation still works.
fn old_runtime(parent: &Parent) -> Result<(), String> {
    let b = backend()?;
    let version = env("DEVIPC_EMU_HIP_VERSION")?;
    let names_version = |what: &str| what.contains(&version) && what.contains("6.2");
    match b.allocate_with(DeviceId(0), G, vmm()) {
        Err(Error::Unsupported { what, .. }) if names_version(&what) => {}
        other => return Err(format!("allocate_with(hip-vmm-fd) gave {other:?}")),
    }
    match b.vmm_fd_support() {
        Err(Error::Unsupported { what, .. }) if names_version(&what) => {}
        other => return Err(format!("vmm_fd_support gave {other:?}")),
    }
    if b.info().capabilities.vmm_fd || b.info().capabilities.vmm_fabric {
        return Err("an old runtime reports VMM sharing".into());
    }
    let fw = Framework::create(G, true)?;
    match b.export_external(DeviceId(0), DevicePtr(fw.va), 64, ExportOptions::default()) {
        Err(Error::Unsupported { what, .. }) if names_version(&what) => {}
        other => return Err(format!("export_external of VMM memory gave {other:?}")),
    }
    fw.free()?;
    let a = b
        .allocate_with(DeviceId(0), 4096, AllocateOptions::default())
        .map_err(e2s)?;
    let t = b
        .export(&a, 0..4096, ExportOptions::default())
        .map_err(e2s)?;
    if t.mechanism() != Mechanism::HipIpcMem {
        return Err(format!(
            "the default allocation exported as {}",
            t.mechanism()
        ));
    }
    b.free(a).map_err(e2s)?;
    parent.say("ok", "");
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Tests (parent side).

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Order {
    ImporterClosesFirst,
    ExporterFreesFirst,
}

struct Share {
    device: u32,
    external: bool,
    /// External memory: the second allocation of a reservation holding two.
    second: bool,
    socket: bool,
    order: Order,
    offset: usize,
    len: usize,
}

fn share(name: &str, version: &str, s: Share) {
    let root = TestRoot::new(&format!("vmm-{name}-{version}"));
    let sock = root.path().join("fd.sock");
    let envs = vec![
        ("DEVIPC_EMU_HIP_VERSION", version.to_owned()),
        (
            "MODE",
            match (s.external, s.second) {
                (true, true) => "external2",
                (true, false) => "external",
                _ => "alloc",
            }
            .to_owned(),
        ),
        (
            "PATHWAY",
            if s.socket { "socket" } else { "pidfd" }.to_owned(),
        ),
        ("SOCK", sock.display().to_string()),
        ("OFFSET", s.offset.to_string()),
        ("LEN", s.len.to_string()),
        ("DEVICE", s.device.to_string()),
    ];
    let mut exp = Child::spawn(&child_entry(), "exporter", &root, &envs);
    let token = exp.expect("token");
    let mut imp = Child::spawn(&child_entry(), "importer", &root, &envs);
    imp.send(&token);
    if s.socket {
        imp.expect("listening");
        exp.send(&format!("send {}", sock.display()));
        exp.expect("sent");
    }
    imp.expect("wrote");
    exp.send("check");
    exp.expect("checked");
    match s.order {
        Order::ImporterClosesFirst => {
            imp.send("close");
            imp.expect("closed");
            exp.send("free");
            let want = if s.external { "ok" } else { "0" };
            assert_eq!(exp.expect("freed"), want, "nobody maps it: freed at once");
        }
        Order::ExporterFreesFirst => {
            exp.send("free");
            let want = if s.external { "busy" } else { "1" };
            assert_eq!(exp.expect("freed"), want, "the importer still maps it");
            // The importer still reads the exporter's bytes and its own.
            imp.send("read");
            imp.expect("read-ok");
            imp.send("close");
            imp.expect("closed");
            if s.external {
                exp.send("free");
                assert_eq!(exp.expect("freed"), "ok");
            } else {
                wait_for_count(&mut exp, "0");
            }
        }
    }
    exp.send("export-fd");
    let answer = exp.expect("export-fd");
    assert!(
        answer.starts_with("refused"),
        "export_fd after the free: {answer}"
    );
    imp.send("import-again");
    let refusal = imp.expect("refused");
    if s.socket {
        // With the fd itself in hand, the revoked lease is what refuses it.
        assert!(refusal.contains("freed"), "{refusal}");
    }
    imp.send("exit");
    imp.wait_success();
    exp.send("exit");
    exp.wait_success();
    root.assert_emulator_clean();
}

/// Asks the exporter for its deferred-free count until it is `want` (the reaper thread
/// frees on its own), failing after 10 s.
fn wait_for_count(exp: &mut Child, want: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        exp.send("count");
        let got = exp.expect("count");
        if got == want {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "deferred frees stayed at {got}, want {want}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn vmm_allocation_via_pidfd_importer_closes_first() {
    if !pidfd_between_children("vmm_allocation_via_pidfd_importer_closes_first") {
        return;
    }
    for v in VERSIONS {
        share(
            "alloc-pidfd",
            v,
            Share {
                device: 0,
                external: false,
                second: false,
                socket: false,
                order: Order::ImporterClosesFirst,
                offset: 0,
                len: G,
            },
        );
    }
}

#[test]
fn vmm_allocation_freed_first_stays_for_the_importer() {
    if !pidfd_between_children("vmm_allocation_freed_first_stays_for_the_importer") {
        return;
    }
    for v in VERSIONS {
        share(
            "alloc-free-first",
            v,
            Share {
                device: 0,
                external: false,
                second: false,
                socket: false,
                order: Order::ExporterFreesFirst,
                offset: 4096 + 3,
                len: 65536,
            },
        );
    }
}

#[test]
fn framework_vmm_memory_exports_whole_with_the_offset() {
    if !pidfd_between_children("framework_vmm_memory_exports_whole_with_the_offset") {
        return;
    }
    for v in VERSIONS.into_iter().chain(["7.12"]) {
        for order in [Order::ImporterClosesFirst, Order::ExporterFreesFirst] {
            share(
                "external",
                v,
                Share {
                    device: 0,
                    external: true,
                    second: false,
                    socket: false,
                    order,
                    offset: 65536 + 7,
                    len: 4096,
                },
            );
        }
    }
}

#[test]
fn the_fd_over_a_unix_socket_imports_without_pidfd() {
    for v in VERSIONS {
        share(
            "socket",
            v,
            Share {
                device: 0,
                external: false,
                second: false,
                socket: true,
                order: Order::ExporterFreesFirst,
                offset: 128,
                len: 4096,
            },
        );
    }
    share(
        "socket-external",
        "7.1",
        Share {
            device: 0,
            external: true,
            second: false,
            socket: true,
            order: Order::ImporterClosesFirst,
            offset: 8192,
            len: 8192,
        },
    );
}

#[test]
fn forged_vmm_tokens_are_refused() {
    if !pidfd_between_children("forged_vmm_tokens_are_refused") {
        return;
    }
    for v in ["6.2", "7.1"] {
        let root = TestRoot::new(&format!("vmm-forged-{v}"));
        let envs = vec![
            ("DEVIPC_EMU_HIP_VERSION", v.to_owned()),
            ("MODE", "alloc".to_owned()),
            ("OFFSET", "0".to_owned()),
            ("LEN", G.to_string()),
        ];
        let mut exp = Child::spawn(&child_entry(), "exporter", &root, &envs);
        let token = exp.expect("token");
        let mut forger = Child::spawn(&child_entry(), "forger", &root, &envs);
        forger.send(&token);
        forger.expect("ok");
        forger.wait_success();
        exp.send("free");
        assert_eq!(exp.expect("freed"), "0");
        exp.send("exit");
        exp.wait_success();
        root.assert_emulator_clean();
    }
}

#[test]
fn a_killed_exporter_is_reclaimed() {
    if !pidfd_between_children("a_killed_exporter_is_reclaimed") {
        return;
    }
    for v in ["7.0", "7.1"] {
        let root = TestRoot::new(&format!("vmm-killed-{v}"));
        let envs = vec![
            ("DEVIPC_EMU_HIP_VERSION", v.to_owned()),
            ("MODE", "alloc".to_owned()),
            ("PATHWAY", "pidfd".to_owned()),
            ("OFFSET", "0".to_owned()),
            ("LEN", G.to_string()),
        ];
        let mut exp = Child::spawn(&child_entry(), "exporter", &root, &envs);
        let token = exp.expect("token");
        let mut imp = Child::spawn(&child_entry(), "importer", &root, &envs);
        imp.send(&token);
        imp.expect("wrote");
        exp.kill();
        imp.send("read");
        imp.expect("read-ok");
        imp.send("close");
        imp.expect("closed");
        imp.send("exit");
        imp.wait_success();
        // Nobody runs any more: what the killed exporter held is reclaimed by the
        // emulator's gc and the lease sweep, as the next process's start would.
        let state = devipc_emulator::State::open(devipc_emulator::Config::for_dir(root.emu_dir()))
            .expect("open the state directory");
        state.gc().expect("gc");
        devipc_shm::lease::sweep_orphans(&root.run_dir()).expect("sweep the leases");
        root.assert_emulator_clean();
    }
}

#[test]
fn vmm_memory_on_device_one_is_copied_from_its_own_device() {
    let root = TestRoot::new("vmm-device-one");
    let envs = vec![("DEVIPC_EMU_HIP_VERSION", "7.1".to_owned())];
    let mut child = Child::spawn(&child_entry(), "device-one", &root, &envs);
    child.expect("ok");
    child.wait_success();
    root.assert_emulator_clean();
}

/// 7.12 answers `HIP_POINTER_ATTRIBUTE_IS_LEGACY_HIP_IPC_CAPABLE`, which then tells the
/// memory kinds apart before any `hipMemRetainAllocationHandle`.
#[test]
fn default_and_legacy_memory_stay_hip_ipc_mem() {
    for v in ["7.1", "7.12"] {
        let root = TestRoot::new(&format!("vmm-local-{v}"));
        let envs = vec![("DEVIPC_EMU_HIP_VERSION", v.to_owned())];
        let mut child = Child::spawn(&child_entry(), "local", &root, &envs);
        child.expect("ok");
        child.wait_success();
        root.assert_emulator_clean();
    }
}

#[test]
fn runtimes_before_6_2_refuse_vmm_fd_with_a_typed_error() {
    for v in ["5.2", "6.1"] {
        let root = TestRoot::new(&format!("vmm-old-{v}"));
        let envs = vec![("DEVIPC_EMU_HIP_VERSION", v.to_owned())];
        let mut child = Child::spawn(&child_entry(), "old-runtime", &root, &envs);
        child.expect("ok");
        child.wait_success();
        root.assert_emulator_clean();
    }
}

#[test]
fn a_vmm_import_on_another_device() {
    if !pidfd_between_children("a_vmm_import_on_another_device") {
        return;
    }
    share(
        "cross-device",
        "7.1",
        Share {
            device: 1,
            external: false,
            second: false,
            socket: false,
            order: Order::ImporterClosesFirst,
            offset: 0,
            len: G,
        },
    );
}

/// Mooncake #3546: a pointer into the second allocation of a reservation is exported as
/// that allocation (its base from hipMemGetAddressRange, the offset in the token), never
/// as the reservation's first.
#[test]
fn a_pointer_in_the_second_allocation_of_a_reservation_exports_that_allocation() {
    if !pidfd_between_children(
        "a_pointer_in_the_second_allocation_of_a_reservation_exports_that_allocation",
    ) {
        return;
    }
    for v in ["6.2", "7.1"] {
        share(
            "external-second",
            v,
            Share {
                device: 0,
                external: true,
                second: true,
                socket: false,
                order: Order::ImporterClosesFirst,
                offset: 4096 + 1,
                len: 4096,
            },
        );
    }
}

/// Whether this test's children may take each other's descriptors with `pidfd_getfd`
/// (siblings: Yama's ptrace scope may forbid it); skips loudly when not.
fn pidfd_between_children(test: &str) -> bool {
    match devipc_testkit::sibling_pidfd_getfd_refused() {
        Some(reason) => {
            devipc_testkit::skip(test, &reason);
            false
        }
        None => true,
    }
}
