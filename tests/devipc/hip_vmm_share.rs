//! HIP virtual memory (`hip-vmm-fd`) through the safe API, between real processes on the
//! emulator (emulated HIP 7.1): the fd travels over the rendezvous socket (`SCM_RIGHTS`)
//! or is fetched with `pidfd_getfd` by a plain `Runtime::import`; bytes go both ways;
//! either side may let go first. The memory is devipc's (`allocate_with`) or the
//! framework's (raw VMM calls, shared with `Runtime::share_external`). A buffer allocated
//! the default way, and framework `hipMalloc` memory, still go as `hip-ipc-mem`.

use std::time::Duration;

use std::ffi::c_void;

use devipc::raw::{DeviceIpc, Mechanism};
use devipc::rendezvous::{ShareOptions, ShareServer};
use devipc::{AllocateOptions, BackendKind, DeviceId, DevicePtr, MemToken, Runtime, SharedBuffer};
use devipc_hip::sys::types::*;
use devipc_hip::sys::{
    HipApi, hipMemAccessFlagsProtReadWrite, hipMemAllocationGranularityMinimum,
    hipMemAllocationTypePinned, hipMemHandleTypePosixFileDescriptor, hipMemLocationTypeDevice,
};
use devipc_testkit::{Child, Parent, TestRoot, child_entry};

/// The socket path the exporter serves.
const SOCK_ENV: &str = "VMM_SHARE_SOCK";
/// How the exporter gets its memory: `vmm` / `default` (devipc's `allocate_with` /
/// `allocate`), `framework-vmm` / `framework-legacy` (raw VMM calls / `hipMalloc`).
const HOW_ENV: &str = "VMM_SHARE_HOW";
/// What the exporter writes at offset 64.
const FROM_EXPORTER: &[u8] = b"from the exporter";
/// What the importer writes back at offset 4096.
const FROM_IMPORTER: &[u8] = b"from the importer";
/// A multiple of the VMM granule (2 MiB on the emulator, as on MI300).
const SIZE: usize = 4 << 20;

#[test]
fn child_role() {
    devipc_testkit::run_child(|role, parent| {
        let rt = Runtime::emulated(BackendKind::Hip).map_err(|e| e.to_string())?;
        match role {
            "exporter" => exporter(&rt, parent),
            "importer" => importer(&rt, parent),
            other => Err(format!("unknown role {other}")),
        }
        .map_err(|e| format!("{role}: {e}"))
    });
}

fn e2s(e: devipc::Error) -> String {
    e.to_string()
}

/// What the exporter shares: a devipc buffer, or framework memory it frees itself.
enum Exported {
    Buffer(SharedBuffer),
    Framework(Box<Framework>),
}

/// Memory "the framework" allocated with the raw vendor table (not devipc), freed the
/// framework's way.
enum Framework {
    /// `hipMemCreate` (POSIX-fd exportable) + reserve + map + set access, as PyTorch's
    /// expandable segments do (ROCm 5.3+ property layout: the test runs at 7.1).
    Vmm {
        api: HipApi,
        handle: hipMemGenericAllocationHandle_t,
        va: *mut c_void,
    },
    /// `hipMalloc`.
    Legacy { api: HipApi, ptr: *mut c_void },
}

fn check(code: hipError_t, what: &str) -> Result<(), String> {
    if code == 0 {
        Ok(())
    } else {
        Err(format!("{what} failed with {code}"))
    }
}

impl Framework {
    fn vmm() -> Result<Framework, String> {
        let api = devipc_emulator::hip::hip_api();
        let prop = hipMemAllocationProp {
            r#type: hipMemAllocationTypePinned,
            requestedHandleType: hipMemHandleTypePosixFileDescriptor,
            location: hipMemLocation {
                r#type: hipMemLocationTypeDevice,
                id: 0,
            },
            ..hipMemAllocationProp::zeroed()
        };
        let mut granularity = 0usize;
        // SAFETY: valid out pointer and property block (5.3+ layout at 7.1).
        let code = unsafe {
            (api.hipMemGetAllocationGranularity.expect("VMM"))(
                &mut granularity,
                &prop,
                hipMemAllocationGranularityMinimum,
            )
        };
        check(code, "hipMemGetAllocationGranularity")?;
        assert_eq!(SIZE % granularity, 0, "SIZE is a multiple of the granule");
        let mut handle: hipMemGenericAllocationHandle_t = std::ptr::null_mut();
        // SAFETY: valid out pointer and property block.
        let code = unsafe { (api.hipMemCreate.expect("VMM"))(&mut handle, SIZE, &prop, 0) };
        check(code, "hipMemCreate")?;
        let mut va: *mut c_void = std::ptr::null_mut();
        // SAFETY: valid out pointer, no address hint.
        let code = unsafe {
            (api.hipMemAddressReserve.expect("VMM"))(&mut va, SIZE, 0, std::ptr::null_mut(), 0)
        };
        check(code, "hipMemAddressReserve")?;
        // SAFETY: the whole reservation and the whole handle made above.
        let code = unsafe { (api.hipMemMap.expect("VMM"))(va, SIZE, 0, handle, 0) };
        check(code, "hipMemMap")?;
        let desc = hipMemAccessDesc {
            location: hipMemLocation {
                r#type: hipMemLocationTypeDevice,
                id: 0,
            },
            flags: hipMemAccessFlagsProtReadWrite,
        };
        // SAFETY: the mapping made above; one descriptor.
        let code = unsafe { (api.hipMemSetAccess.expect("VMM"))(va, SIZE, &desc, 1) };
        check(code, "hipMemSetAccess")?;
        Ok(Framework::Vmm { api, handle, va })
    }

    fn legacy() -> Result<Framework, String> {
        let api = devipc_emulator::hip::hip_api();
        let mut ptr: *mut c_void = std::ptr::null_mut();
        // SAFETY: valid out pointer.
        check(unsafe { (api.hipMalloc)(&mut ptr, SIZE) }, "hipMalloc")?;
        Ok(Framework::Legacy { api, ptr })
    }

    fn ptr(&self) -> DevicePtr {
        match self {
            Framework::Vmm { va, .. } => DevicePtr(*va as u64),
            Framework::Legacy { ptr, .. } => DevicePtr(*ptr as u64),
        }
    }

    /// The framework's free (after `close_external`).
    fn free(self) -> Result<(), String> {
        match self {
            // SAFETY: the mapping, reservation and handle of `vmm`, released once.
            Framework::Vmm { api, handle, va } => unsafe {
                check((api.hipMemUnmap.expect("VMM"))(va, SIZE), "hipMemUnmap")?;
                check(
                    (api.hipMemAddressFree.expect("VMM"))(va, SIZE),
                    "hipMemAddressFree",
                )?;
                check((api.hipMemRelease.expect("VMM"))(handle), "hipMemRelease")
            },
            // SAFETY: the allocation of `legacy`, freed once.
            Framework::Legacy { api, ptr } => check(unsafe { (api.hipFree)(ptr) }, "hipFree"),
        }
    }
}

/// Gets memory as `VMM_SHARE_HOW` says, writes [`FROM_EXPORTER`], serves one importer
/// over the socket and says the token (for a pidfd import); then answers `check` (reads
/// what the importer wrote), `drop` (a buffer: drops it and the server; framework memory:
/// drops the server and tries `close_external`, refused while the importer maps it) and
/// `free` (framework memory: `close_external`, then the framework's free), until `exit`.
fn exporter(rt: &Runtime, parent: &Parent) -> Result<(), String> {
    let how = std::env::var(HOW_ENV).map_err(|e| e.to_string())?;
    let sock = std::env::var(SOCK_ENV).map_err(|e| e.to_string())?;
    let exported = match how.as_str() {
        "vmm" => Exported::Buffer(
            rt.allocate_with(
                DeviceId(0),
                SIZE,
                AllocateOptions::mechanism(Mechanism::HipVmmFd),
            )
            .map_err(e2s)?,
        ),
        "default" => Exported::Buffer(rt.allocate(DeviceId(0), SIZE).map_err(e2s)?),
        "framework-vmm" => Exported::Framework(Box::new(Framework::vmm()?)),
        "framework-legacy" => Exported::Framework(Box::new(Framework::legacy()?)),
        other => return Err(format!("unknown {HOW_ENV} {other}")),
    };
    let server: ShareServer = match &exported {
        Exported::Buffer(b) => {
            b.write(64, FROM_EXPORTER).map_err(e2s)?;
            b.share(&sock, ShareOptions::default()).map_err(e2s)?
        }
        Exported::Framework(f) => {
            // SAFETY: the framework's live allocation of SIZE bytes, on device 0.
            unsafe {
                rt.backend()
                    .write(f.ptr().offset(64).map_err(e2s)?, FROM_EXPORTER)
            }
            .map_err(e2s)?;
            rt.share_external(DeviceId(0), f.ptr(), SIZE, &sock, ShareOptions::default())
                .map_err(e2s)?
        }
    };
    parent.say("mechanism", &server.token().mechanism().to_string());
    parent.say("token", &server.token().to_text());
    parent.say("ready", "");
    let peer = server
        .accept_timeout(Duration::from_secs(60))
        .map_err(e2s)?;
    parent.say("accepted", &peer.credentials.pid.to_string());
    let mut server = Some(server);
    let mut exported = Some(exported);
    loop {
        match parent.hear().as_str() {
            "check" => {
                let mut got = vec![0u8; FROM_IMPORTER.len()];
                match exported.as_ref().ok_or("already dropped")? {
                    Exported::Buffer(b) => b.read(4096, &mut got).map_err(e2s)?,
                    // SAFETY: as for the write above.
                    Exported::Framework(f) => unsafe {
                        rt.backend()
                            .read(f.ptr().offset(4096).map_err(e2s)?, &mut got)
                    }
                    .map_err(e2s)?,
                }
                parent.say("read", &String::from_utf8_lossy(&got));
            }
            "drop" => {
                server = None;
                match exported.take().ok_or("already dropped")? {
                    Exported::Buffer(b) => {
                        drop(b);
                        parent.say("dropped", "");
                    }
                    Exported::Framework(f) => {
                        let outcome = match rt.close_external(DeviceId(0), f.ptr()) {
                            Ok(()) => "closed",
                            Err(_) => "refused",
                        };
                        exported = Some(Exported::Framework(f));
                        parent.say("dropped", outcome);
                    }
                }
            }
            "free" => {
                let Some(Exported::Framework(f)) = exported.take() else {
                    return Err("free: no framework memory".into());
                };
                match rt.close_external(DeviceId(0), f.ptr()) {
                    Ok(()) => {}
                    // Closed by `drop` already.
                    Err(devipc::Error::InvalidArgument { .. }) => {}
                    Err(e) => return Err(e2s(e)),
                }
                (*f).free()?;
                parent.say("freed", "");
            }
            "exit" => {
                drop(server);
                return Ok(());
            }
            other => return Err(format!("unknown command {other}")),
        }
    }
}

/// Connects (the fd comes with the offer) or, told `pidfd <token>`, imports the token
/// alone (the fd fetched with pidfd_getfd); reads [`FROM_EXPORTER`], writes
/// [`FROM_IMPORTER`]; `read` reads again (after the exporter dropped its buffer); `close`
/// drops the import; `exit`.
fn importer(rt: &Runtime, parent: &Parent) -> Result<(), String> {
    let command = parent.hear();
    let buffer = if let Some(text) = command.strip_prefix("pidfd ") {
        let token = MemToken::from_text(text).map_err(e2s)?;
        rt.import(&token, DeviceId(0)).map_err(e2s)?
    } else {
        let sock = std::env::var(SOCK_ENV).map_err(|e| e.to_string())?;
        rt.connect(&sock, DeviceId(0)).map_err(e2s)?.buffer
    };
    let mut got = vec![0u8; FROM_EXPORTER.len()];
    buffer.read(64, &mut got).map_err(e2s)?;
    parent.say("read", &String::from_utf8_lossy(&got));
    buffer.write(4096, FROM_IMPORTER).map_err(e2s)?;
    parent.say("wrote", "");
    let mut buffer = Some(buffer);
    loop {
        match parent.hear().as_str() {
            "read" => {
                let b = buffer.as_ref().ok_or("already closed")?;
                b.read(64, &mut got).map_err(e2s)?;
                parent.say("read", &String::from_utf8_lossy(&got));
            }
            "close" => {
                buffer = None;
                parent.say("closed", "");
            }
            "exit" => return Ok(()),
            other => return Err(format!("unknown command {other}")),
        }
    }
}

/// How the importer gets the fd, and who lets go first.
#[derive(Debug, Clone, Copy)]
enum Route {
    Rendezvous,
    Pidfd,
}

fn round_trip(how: &str, route: Route, importer_closes_first: bool) -> String {
    let root = TestRoot::new(&format!(
        "vmm-share-{how}-{route:?}-{importer_closes_first}"
    ));
    let sock = root.path().join("vmm.sock");
    let sock = sock.to_str().unwrap().to_owned();
    let spawn = |role| {
        Child::build(&child_entry(), role, &root)
            .env(SOCK_ENV, &sock)
            .env(HOW_ENV, how)
            .env("DEVIPC_EMU_HIP_VERSION", "7.1")
            .spawn()
    };
    let mut exporter = spawn("exporter");
    let mechanism = exporter.expect("mechanism");
    let token = exporter.expect("token");
    exporter.expect("ready");
    let mut importer = spawn("importer");
    match route {
        Route::Rendezvous => importer.send("connect"),
        Route::Pidfd => importer.send(&format!("pidfd {token}")),
    }
    if matches!(route, Route::Pidfd) {
        // The exporter still waits for one connection: give it one and let it go.
        let mut other = spawn("importer");
        other.send("connect");
        other.expect("read");
        other.expect("wrote");
        other.send("exit");
        other.wait_success();
    }
    assert_eq!(
        importer.expect("read"),
        String::from_utf8_lossy(FROM_EXPORTER)
    );
    importer.expect("wrote");
    exporter.expect("accepted");
    exporter.send("check");
    assert_eq!(
        exporter.expect("read"),
        String::from_utf8_lossy(FROM_IMPORTER)
    );
    let framework = how.starts_with("framework");
    if importer_closes_first {
        importer.send("close");
        importer.expect("closed");
        exporter.send("drop");
        let outcome = exporter.expect("dropped");
        if framework {
            assert_eq!(outcome, "closed", "nobody maps it any more");
            exporter.send("free");
            exporter.expect("freed");
        }
    } else {
        // The exporter lets go first: a devipc buffer's free waits for the importer's
        // mapping; framework memory's close_external is refused while it maps it.
        exporter.send("drop");
        let outcome = exporter.expect("dropped");
        if framework {
            assert_eq!(outcome, "refused", "the importer still maps it");
        }
        importer.send("read");
        assert_eq!(
            importer.expect("read"),
            String::from_utf8_lossy(FROM_EXPORTER)
        );
        importer.send("close");
        importer.expect("closed");
        if framework {
            exporter.send("free");
            exporter.expect("freed");
        }
    }
    importer.send("exit");
    importer.wait_success();
    exporter.send("exit");
    exporter.wait_success();
    root.assert_emulator_clean();
    mechanism
}

#[test]
fn vmm_memory_through_the_rendezvous_both_ways_either_side_first() {
    for importer_first in [true, false] {
        let mechanism = round_trip("vmm", Route::Rendezvous, importer_first);
        assert_eq!(mechanism, "hip-vmm-fd");
    }
}

#[test]
fn vmm_memory_by_pidfd_both_ways_either_side_first() {
    if !pidfd_between_children("vmm_memory_by_pidfd_both_ways_either_side_first") {
        return;
    }
    for importer_first in [true, false] {
        let mechanism = round_trip("vmm", Route::Pidfd, importer_first);
        assert_eq!(mechanism, "hip-vmm-fd");
    }
}

#[test]
fn default_memory_through_the_rendezvous_stays_legacy() {
    let mechanism = round_trip("default", Route::Rendezvous, true);
    assert_eq!(mechanism, "hip-ipc-mem");
}

#[test]
fn framework_vmm_memory_through_the_rendezvous_and_by_pidfd_either_side_first() {
    let test = "framework_vmm_memory_through_the_rendezvous_and_by_pidfd_either_side_first";
    let routes: &[Route] = if pidfd_between_children(test) {
        &[Route::Rendezvous, Route::Pidfd]
    } else {
        &[Route::Rendezvous]
    };
    for &route in routes {
        for importer_first in [true, false] {
            let mechanism = round_trip("framework-vmm", route, importer_first);
            assert_eq!(mechanism, "hip-vmm-fd");
        }
    }
}

#[test]
fn framework_hipmalloc_memory_picks_the_legacy_mechanism() {
    for importer_first in [true, false] {
        let mechanism = round_trip("framework-legacy", Route::Rendezvous, importer_first);
        assert_eq!(mechanism, "hip-ipc-mem");
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
