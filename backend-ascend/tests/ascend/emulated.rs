//! The backend on the devipc emulator, across real processes: export, grant, import,
//! read/write and close on both memory paths (VMM shareable handles and IPC keys), a
//! notify ping-pong, cross-device imports (a key import on another device is read and
//! written through staged asynchronous copies), and the error paths, each mapped to the vendor
//! code and name the emulator documents for it (its rule id appears in the runtime
//! message).
//!
//! Each test starts two children by re-running this test binary on the `child_role` test
//! with `DEVIPC_ASCEND_TEST_ROLE=<scenario>:<a|b>`. The children talk through the parent,
//! which relays the lines they print that contain `@@ <key> <value>` to the other child's
//! stdin (tokens travel as `MemToken::to_text`). Every test has its own emulator state
//! directory (`DEVIPC_EMU_DIR`), removed afterwards; when both children succeeded the
//! directory must hold nothing but the emulator's `ledger`, so a leak of the backend (an
//! allocation, mapping, key or notify never released) fails the test.
//!
//! With feature `emulator` the children start the backend with
//! `AscendBackend::emulated()`, otherwise with `from_api(devipc_emulator::acl::acl_api())`.

use devipc_testkit::{RawIo, child_entry};
use serial_test::parallel;
use std::ffi::c_void;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use devipc_ascend::AscendBackend;
use devipc_ascend::sys::types::{ACL_MEM_MALLOC_HUGE_FIRST, ACL_MEMCPY_DEVICE_TO_HOST};
use devipc_core::token::SignalTokenParts;
use devipc_core::{
    DeviceId, DeviceIpc, DevicePtr, Error, ExportOptions, LibrarySource, Mechanism, MemToken,
    ProcessId, RawStream, RuntimeVersion, SignalToken,
};

const ROLE_ENV: &str = "DEVIPC_ASCEND_TEST_ROLE";
/// Generous: waits that should succeed must not fail on a loaded 2-core machine.
const LONG: Duration = Duration::from_secs(60);
/// A child that outlives this kills itself, so a broken test never leaves processes.
const CHILD_WATCHDOG: Duration = Duration::from_secs(180);

// ---------------------------------------------------------------------------------------
// Parent side: a private state directory, two children, a relay.

/// A test's emulator state directory, removed on drop (also when the test fails).
struct StateDir(PathBuf);

impl StateDir {
    fn new(name: &str) -> StateDir {
        let base = if std::path::Path::new("/dev/shm").is_dir() {
            PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        let dir = base.join(format!("devipc-ascend-it-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        StateDir(dir)
    }

    /// Every entry of the directory, sorted, after sweeping the liveness beacons of
    /// processes that are gone (as the next process would: none removes its own).
    fn entries(&self) -> Vec<String> {
        let _ = devipc_shm::liveness::sweep(&self.0);
        let mut names: Vec<String> = std::fs::read_dir(&self.0)
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }
}

impl Drop for StateDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `scenario` as two children `a` and `b` sharing a fresh state directory, relays
/// their messages, and checks that both succeed and leave nothing behind.
fn run_pair(scenario: &str) {
    let started = Instant::now();
    let dir = StateDir::new(scenario);
    let mut children = Vec::new();
    for side in ["a", "b"] {
        let child = Command::new(std::env::current_exe().unwrap())
            .args([
                &*child_entry(),
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(ROLE_ENV, format!("{scenario}:{side}"))
            .env("DEVIPC_EMU_DIR", &dir.0)
            .env("DEVIPC_EMU_DEVICES", "2")
            .env_remove("DEVIPC_EMU_BREAK_RULE")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        children.push(child);
    }
    let (mut a, mut b) = {
        let mut it = children.into_iter();
        (it.next().unwrap(), it.next().unwrap())
    };
    let relays = [
        relay(a.stdout.take().unwrap(), b.stdin.take().unwrap()),
        relay(b.stdout.take().unwrap(), a.stdin.take().unwrap()),
    ];
    let status_a = a.wait().unwrap();
    let status_b = b.wait().unwrap();
    for r in relays {
        r.join().unwrap();
    }
    assert!(
        status_a.success(),
        "{scenario}: child a exited with {status_a}"
    );
    assert!(
        status_b.success(),
        "{scenario}: child b exited with {status_b}"
    );
    assert_eq!(
        dir.entries(),
        ["ledger"],
        "{scenario}: the children left objects in the emulator's state directory"
    );
    eprintln!("{scenario}: {:?}", started.elapsed());
}

/// Forwards the protocol lines one child prints to the other's stdin; at the end of the
/// output (the child exited) closes that stdin, so a waiting peer fails instead of
/// hanging.
fn relay(
    from: std::process::ChildStdout,
    mut to: std::process::ChildStdin,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        for line in BufReader::new(from).lines() {
            let Ok(line) = line else { break };
            // The harness prints "test emulated::child_role ... " without a newline before the
            // test runs, so a message may follow it on the same line.
            if let Some((_, msg)) = line.split_once("@@ ") {
                if writeln!(to, "@@ {msg}").and_then(|()| to.flush()).is_err() {
                    break;
                }
            }
        }
    })
}

// ---------------------------------------------------------------------------------------
// Child side.

/// The other child, through the parent.
struct Peer {
    input: std::io::Lines<std::io::StdinLock<'static>>,
}

impl Peer {
    fn send(&mut self, key: &str, value: impl std::fmt::Display) {
        let mut out = std::io::stdout().lock();
        writeln!(out, "\n@@ {key} {value}").unwrap();
        out.flush().unwrap();
    }

    /// The next message, which must be `key`.
    fn recv(&mut self, key: &str) -> String {
        let line = self
            .input
            .next()
            .unwrap_or_else(|| panic!("the peer exited before sending {key:?}"))
            .unwrap();
        let msg = line.strip_prefix("@@ ").unwrap_or(&line);
        let (k, v) = msg.split_once(' ').unwrap_or((msg, ""));
        assert_eq!(k, key, "unexpected message {msg:?}");
        v.to_owned()
    }

    fn recv_token(&mut self, key: &str) -> MemToken {
        MemToken::from_text(&self.recv(key)).unwrap()
    }

    fn recv_signal(&mut self, key: &str) -> SignalToken {
        SignalToken::from_text(&self.recv(key)).unwrap()
    }

    fn recv_pid(&mut self) -> ProcessId {
        ProcessId(self.recv("pid").parse().unwrap())
    }
}

/// Entry point of child processes; a no-op test in the parent run.
#[test]
#[parallel]
fn child_role() {
    let Ok(role) = std::env::var(ROLE_ENV) else {
        return;
    };
    std::thread::spawn(|| {
        std::thread::sleep(CHILD_WATCHDOG);
        eprintln!("child watchdog: giving up");
        std::process::exit(97);
    });
    let (scenario, side) = role.split_once(':').expect("role is <scenario>:<side>");
    let mut peer = Peer {
        input: std::io::stdin().lines(),
    };
    let b = backend();
    match (scenario, side) {
        ("vmm", "a") => vmm_a(&b, &mut peer),
        ("vmm", "b") => vmm_b(&b, &mut peer),
        ("ipc_key", "a") => ipc_key_a(&b, &mut peer),
        ("ipc_key", "b") => ipc_key_b(&b, &mut peer),
        ("notify", "a") => notify_a(&b, &mut peer),
        ("notify", "b") => notify_b(&b, &mut peer),
        ("cross_device", "a") => cross_device_a(&b, &mut peer),
        ("cross_device", "b") => cross_device_b(&b, &mut peer),
        ("errors", "a") => errors_a(&b, &mut peer),
        ("errors", "b") => errors_b(&b, &mut peer),
        other => panic!("unknown role {other:?}"),
    }
    // Everything was released explicitly; the backend's drop finds nothing left.
    drop(b);
}

fn backend() -> AscendBackend {
    #[cfg(feature = "emulator")]
    let b = AscendBackend::emulated().unwrap();
    #[cfg(not(feature = "emulator"))]
    let b = AscendBackend::from_api(std::sync::Arc::new(devipc_emulator::acl::acl_api())).unwrap();
    b
}

/// The byte pattern both sides of a transfer agree on.
fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

fn read(b: &AscendBackend, ptr: DevicePtr, len: usize) -> Vec<u8> {
    let mut buf = vec![0u8; len];
    b.read_raw(ptr, &mut buf).unwrap();
    buf
}

/// Asserts a vendor error of `api` with `code` and `name`, whose runtime message names
/// the emulator rule `rule`.
#[track_caller]
fn assert_vendor(err: &Error, api: &str, code: i32, name: &str, rule: &str) {
    match err {
        Error::Vendor {
            api: a,
            code: c,
            name: n,
            message,
            ..
        } => {
            assert_eq!((*a, *c, n.as_str()), (api, code, name), "{err}");
            assert!(message.contains(rule), "{err}");
        }
        other => panic!("expected {api} to fail with {name}, got {other:?}"),
    }
}

/// Memory the framework allocated (`aclrtMalloc` on `device`), as torch_npu would.
fn framework_malloc(b: &AscendBackend, device: i32, size: usize) -> DevicePtr {
    let api = b.api();
    // SAFETY: plain value argument naming a valid emulated device.
    assert_eq!(unsafe { (api.aclrtSetDevice)(device) }, 0);
    let mut ptr: *mut c_void = std::ptr::null_mut();
    // SAFETY: `ptr` is a valid out-pointer; the size is non-zero.
    let code = unsafe { (api.aclrtMalloc)(&mut ptr, size, ACL_MEM_MALLOC_HUGE_FIRST) };
    assert_eq!(code, 0);
    DevicePtr(ptr as u64)
}

fn framework_free(b: &AscendBackend, device: i32, ptr: DevicePtr) {
    let api = b.api();
    // SAFETY: plain value argument naming a valid emulated device.
    assert_eq!(unsafe { (api.aclrtSetDevice)(device) }, 0);
    // SAFETY: `ptr` came from aclrtMalloc in this process and is freed once.
    assert_eq!(unsafe { (api.aclrtFree)(ptr.0 as usize as *mut c_void) }, 0);
}

const DRV: i32 = 507_899;
const DRV_NAME: &str = "ACL_ERROR_RT_DRV_INTERNAL_ERROR";

// ---- VMM: allocate, export, grant, import, read/write, close ---------------------------

#[test]
#[parallel]
fn vmm_export_grant_import_read_write_close() {
    run_pair("vmm");
}

fn vmm_a(b: &AscendBackend, peer: &mut Peer) {
    let alloc = b.allocate(DeviceId(0), 3 << 20).unwrap();
    assert_eq!(alloc.size, 4 << 20, "rounded up to the 2 MiB granularity");
    let off = 1 << 20;
    b.write_raw(alloc.ptr.offset(off).unwrap(), &pattern(1, 4096))
        .unwrap();
    let token = b
        .export(&alloc, off..off + 4096, ExportOptions::granted_only())
        .unwrap();
    assert_eq!(token.mechanism(), Mechanism::AscendVmm);
    assert_eq!((token.offset(), token.len()), (off as u64, 4096));
    assert_eq!(token.origin().pid, b.process_id().unwrap());
    // Ascend forbids importing in the exporting process (the facade short-cuts it).
    let err = b.import(&token, DeviceId(0)).unwrap_err();
    assert_vendor(
        &err,
        "aclrtMemImportFromShareableHandle",
        DRV,
        DRV_NAME,
        "ascend.vmm.same-process-import-rejected",
    );
    peer.send("token", token.to_text());
    let pid = peer.recv_pid();
    b.grant(&token, &[pid]).unwrap();
    peer.send("granted", "");
    peer.recv("written");
    assert_eq!(
        read(b, alloc.ptr.offset(off).unwrap(), 4096),
        pattern(2, 4096)
    );
    peer.recv("closed");
    b.free(alloc.clone()).unwrap();
    assert!(matches!(
        b.free(alloc),
        Err(Error::UnknownHandle {
            kind: "allocation",
            ..
        })
    ));
}

fn vmm_b(b: &AscendBackend, peer: &mut Peer) {
    let token = peer.recv_token("token");
    let err = b.import(&token, DeviceId(0)).unwrap_err();
    assert_vendor(
        &err,
        "aclrtMemImportFromShareableHandle",
        DRV,
        DRV_NAME,
        "ascend.vmm.trustlist-required",
    );
    peer.send("pid", b.process_id().unwrap());
    peer.recv("granted");
    let m = b.import(&token, DeviceId(0)).unwrap();
    assert_eq!((m.device, m.len), (DeviceId(0), 4096));
    assert_eq!(read(b, m.ptr, 4096), pattern(1, 4096));
    b.write_raw(m.ptr, &pattern(2, 4096)).unwrap();
    peer.send("written", "");
    b.close(m.clone()).unwrap();
    assert!(matches!(
        b.close(m),
        Err(Error::UnknownHandle {
            kind: "mapping",
            ..
        })
    ));
    peer.send("closed", "");
}

// ---- IPC keys: framework memory -------------------------------------------------------

#[test]
#[parallel]
fn ipc_key_export_grant_import_read_write_close() {
    run_pair("ipc_key");
}

fn ipc_key_a(b: &AscendBackend, peer: &mut Peer) {
    let base = framework_malloc(b, 0, 64 << 10);
    let ptr = base.offset(4096).unwrap();
    b.write_raw(ptr, &pattern(3, 100)).unwrap();
    let token = b
        .export_external(DeviceId(0), ptr, 100, ExportOptions::granted_only())
        .unwrap();
    assert_eq!(token.mechanism(), Mechanism::AscendIpcKey);
    // The whole 65-byte key buffer, then the 32-byte name of the exporter's lease.
    assert_eq!(
        token.payload().len(),
        65 + 32,
        "the whole key buffer and the lease"
    );
    assert_eq!((token.offset(), token.len()), (4096, 100));
    peer.send("token", token.to_text());
    let pid = peer.recv_pid();
    b.grant(&token, &[pid]).unwrap();
    peer.send("granted", "");
    peer.recv("written");
    assert_eq!(read(b, ptr, 100), pattern(4, 100));
    // The exporter may not destroy its key while an importer holds it: devipc refuses
    // before the runtime sees the call (the importer holds the key's lease).
    let err = b.close_external(DeviceId(0), ptr).unwrap_err();
    assert!(
        matches!(&err, Error::InvalidArgument { what } if what.contains("importers still have")),
        "{err}"
    );
    peer.send("refused", "");
    peer.recv("closed");
    b.close_external(DeviceId(0), ptr).unwrap();
    framework_free(b, 0, base);
}

fn ipc_key_b(b: &AscendBackend, peer: &mut Peer) {
    let token = peer.recv_token("token");
    let err = b.import(&token, DeviceId(0)).unwrap_err();
    assert_vendor(
        &err,
        "aclrtIpcMemImportByKey",
        DRV,
        DRV_NAME,
        "ascend.ipc-key.trustlist-required",
    );
    peer.send("pid", b.process_id().unwrap());
    peer.recv("granted");
    let m = b.import(&token, DeviceId(0)).unwrap();
    assert_eq!(m.len, 100);
    assert_eq!(read(b, m.ptr, 100), pattern(3, 100));
    b.write_raw(m.ptr, &pattern(4, 100)).unwrap();
    peer.send("written", "");
    peer.recv("refused");
    b.close(m.clone()).unwrap();
    assert!(matches!(b.close(m), Err(Error::UnknownHandle { .. })));
    peer.send("closed", "");
}

// ---- notify ping-pong -----------------------------------------------------------------

#[test]
#[parallel]
fn notify_ping_pong() {
    run_pair("notify");
}

const ROUNDS: usize = 5;

fn notify_a(b: &AscendBackend, peer: &mut Peer) {
    let ping = b.create_signal(DeviceId(0)).unwrap();
    let ping_token = b
        .export_signal(&ping, ExportOptions::granted_only())
        .unwrap();
    assert_eq!(ping_token.mechanism(), Mechanism::AscendNotify);
    peer.send("ping", ping_token.to_text());
    peer.send("pid", b.process_id().unwrap());
    let pong_token = peer.recv_signal("pong");
    let pid = peer.recv_pid();
    b.grant_signal(&ping_token, &[pid]).unwrap();
    peer.send("granted", "");
    peer.recv("granted");
    let pong = b.import_signal(&pong_token, DeviceId(0)).unwrap();
    for _ in 0..ROUNDS {
        b.notify(&ping, RawStream::DEFAULT).unwrap();
        b.wait(&pong, RawStream::DEFAULT, Some(LONG)).unwrap();
    }
    // Records do not accumulate: two records release one wait.
    b.notify(&ping, RawStream::DEFAULT).unwrap();
    b.notify(&ping, RawStream::DEFAULT).unwrap();
    peer.send("twice", "");
    peer.recv("done");
    b.destroy_signal(pong).unwrap();
    b.destroy_signal(ping.clone()).unwrap();
    assert!(matches!(
        b.destroy_signal(ping),
        Err(Error::UnknownHandle { kind: "signal", .. })
    ));
}

fn notify_b(b: &AscendBackend, peer: &mut Peer) {
    let ping_token = peer.recv_signal("ping");
    let pid = peer.recv_pid();
    let err = b.import_signal(&ping_token, DeviceId(0)).unwrap_err();
    assert_vendor(
        &err,
        "aclrtNotifyImportByKey",
        DRV,
        DRV_NAME,
        "ascend.notify.trustlist-required",
    );
    let pong = b.create_signal(DeviceId(0)).unwrap();
    let pong_token = b
        .export_signal(&pong, ExportOptions::granted_only())
        .unwrap();
    peer.send("pong", pong_token.to_text());
    peer.send("pid", b.process_id().unwrap());
    b.grant_signal(&pong_token, &[pid]).unwrap();
    peer.send("granted", "");
    peer.recv("granted");
    let ping = b.import_signal(&ping_token, DeviceId(0)).unwrap();
    for _ in 0..ROUNDS {
        b.wait(&ping, RawStream::DEFAULT, Some(LONG)).unwrap();
        b.notify(&pong, RawStream::DEFAULT).unwrap();
    }
    peer.recv("twice");
    b.wait(&ping, RawStream::DEFAULT, Some(LONG)).unwrap();
    let started = Instant::now();
    let err = b
        .wait(&ping, RawStream::DEFAULT, Some(Duration::from_millis(300)))
        .unwrap_err();
    let took = started.elapsed();
    // The runtime counts whole seconds, but devipc keeps the caller's deadline on the host
    // (notify.rs): 300 ms, not 1 s, and the error states the time measured.
    assert!(
        matches!(err, Error::Timeout { after, .. }
            if after >= Duration::from_millis(300) && after <= took),
        "{err:?} (the caller saw {took:?})"
    );
    assert!(
        took >= Duration::from_millis(300) && took <= Duration::from_millis(550),
        "{took:?}"
    );
    peer.send("done", "");
    b.destroy_signal(ping).unwrap();
    b.destroy_signal(pong).unwrap();
}

// ---- cross-device imports -------------------------------------------------------------

#[test]
#[parallel]
fn cross_device_imports() {
    run_pair("cross_device");
}

/// The framework block exported by key in `cross_device`: more than one staging chunk.
const KEY_BLOCK: usize = devipc_ascend::STAGING_CHUNK + (1 << 20);
/// Where and how much the importer writes into it: across the chunk boundary of a
/// write that starts there.
const KEY_WRITE_AT: usize = 1000;
const KEY_WRITE_LEN: usize = devipc_ascend::STAGING_CHUNK + 123;

/// A pattern that differs between positions 256 bytes (and 4 MiB) apart, so a chunk
/// copied to the wrong place shows.
fn long_pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len as u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8 ^ seed)
        .collect()
}

fn cross_device_a(b: &AscendBackend, peer: &mut Peer) {
    let alloc = b.allocate(DeviceId(1), 1).unwrap();
    b.write_raw(alloc.ptr, &pattern(5, 256)).unwrap();
    let vmm = b
        .export(&alloc, 0..256, ExportOptions::any_process())
        .unwrap();
    assert_eq!(vmm.device(), DeviceId(1));
    // Larger than one staging chunk, so the peer's staged copies take several.
    let block = framework_malloc(b, 1, KEY_BLOCK);
    b.write_raw(block, &long_pattern(6, KEY_BLOCK)).unwrap();
    let key = b
        .export_external(DeviceId(1), block, KEY_BLOCK, ExportOptions::any_process())
        .unwrap();
    let signal = b.create_signal(DeviceId(1)).unwrap();
    let signal_token = b
        .export_signal(&signal, ExportOptions::any_process())
        .unwrap();
    peer.send("vmm", vmm.to_text());
    peer.send("key", key.to_text());
    peer.send("signal", signal_token.to_text());
    b.wait(&signal, RawStream::DEFAULT, Some(LONG)).unwrap();
    // Now the peer waits on its import of the device-1 notify.
    b.notify(&signal, RawStream::DEFAULT).unwrap();
    peer.send("recorded", "");
    assert_eq!(read(b, alloc.ptr, 256), pattern(7, 256));
    // What the peer wrote through its cross-device key import, around it what it did not.
    let mut want = long_pattern(6, KEY_BLOCK);
    want[KEY_WRITE_AT..KEY_WRITE_AT + KEY_WRITE_LEN]
        .copy_from_slice(&long_pattern(8, KEY_WRITE_LEN));
    assert!(read(b, block, KEY_BLOCK) == want, "the peer's staged write");
    peer.recv("closed");
    b.destroy_signal(signal).unwrap();
    b.close_external(DeviceId(1), block).unwrap();
    framework_free(b, 1, block);
    b.free(alloc).unwrap();
}

fn cross_device_b(b: &AscendBackend, peer: &mut Peer) {
    let vmm = peer.recv_token("vmm");
    let key = peer.recv_token("key");
    let signal_token = peer.recv_signal("signal");
    // Exported by device 1, used on device 0: peer access (VMM), the import flag (key
    // and notify); no grant, as they were exported for any process.
    let m = b.import(&vmm, DeviceId(0)).unwrap();
    assert_eq!(m.device, DeviceId(0));
    assert_eq!(read(b, m.ptr, 256), pattern(5, 256));
    let k = b.import(&key, DeviceId(0)).unwrap();
    assert_eq!(k.len, KEY_BLOCK);
    // The vendor allows only asynchronous device-to-device copies of key-imported memory
    // across devices (RT-DOC 11-07): a raw host copy is refused, as on an NPU ...
    let mut host = [0u8; 64];
    let api = b.api();
    // SAFETY: `host` is a live buffer of 64 bytes; the emulator checks the device side.
    let code = unsafe {
        (api.aclrtMemcpy)(
            host.as_mut_ptr().cast(),
            host.len(),
            k.ptr.0 as usize as *const c_void,
            host.len(),
            ACL_MEMCPY_DEVICE_TO_HOST,
        )
    };
    assert_eq!(code, 107_000);
    // SAFETY: no arguments; the message is copied at once.
    let message = unsafe { std::ffi::CStr::from_ptr((api.aclGetRecentErrMsg)()) }
        .to_string_lossy()
        .into_owned();
    assert!(
        message.contains("ascend.ipc-key.cross-device-copy-restricted"),
        "{message}"
    );
    // ... so the backend stages its reads and writes through device 0 memory, in chunks.
    assert!(read(b, k.ptr, KEY_BLOCK) == long_pattern(6, KEY_BLOCK));
    assert_eq!(
        read(b, k.ptr.offset(KEY_WRITE_AT).unwrap(), 100),
        long_pattern(6, KEY_BLOCK)[KEY_WRITE_AT..KEY_WRITE_AT + 100]
    );
    b.write_raw(
        k.ptr.offset(KEY_WRITE_AT).unwrap(),
        &long_pattern(8, KEY_WRITE_LEN),
    )
    .unwrap();
    assert!(
        read(b, k.ptr.offset(KEY_WRITE_AT).unwrap(), KEY_WRITE_LEN)
            == long_pattern(8, KEY_WRITE_LEN)
    );
    let s = b.import_signal(&signal_token, DeviceId(0)).unwrap();
    b.write_raw(m.ptr, &pattern(7, 256)).unwrap();
    b.notify(&s, RawStream::DEFAULT).unwrap();
    // Imported on device 0, created on device 1: the runtime takes the wait only on the
    // creator's device (CheckIpcNotifyDevId), which the backend binds for it.
    peer.recv("recorded");
    b.wait(&s, RawStream::DEFAULT, Some(LONG)).unwrap();
    b.close(m).unwrap();
    b.close(k).unwrap();
    b.destroy_signal(s).unwrap();
    peer.send("closed", "");
}

// ---- error paths ----------------------------------------------------------------------

#[test]
#[parallel]
fn error_paths_are_typed() {
    run_pair("errors");
}

fn errors_a(b: &AscendBackend, peer: &mut Peer) {
    let info = b.info();
    assert_eq!(info.source, LibrarySource::Emulated);
    assert_eq!(info.runtime_version, Some(RuntimeVersion::new(8, 5, 0)));
    let caps = info.capabilities;
    assert!(caps.access_control && caps.export_allocation && caps.export_external);
    assert!(caps.signals && caps.cross_device_import && caps.disable_pid_validation);
    assert_eq!(b.device_count().unwrap(), 2);

    // A stale shareable handle: exported, then freed before the peer imports.
    let gone = b.allocate(DeviceId(0), 1).unwrap();
    let stale = b
        .export(&gone, 0..16, ExportOptions::any_process())
        .unwrap();
    b.free(gone).unwrap();
    peer.send("stale", stale.to_text());
    // A stale key: exported, then closed.
    let block = framework_malloc(b, 0, 4096);
    let stale_key = b
        .export_external(DeviceId(0), block, 16, ExportOptions::any_process())
        .unwrap();
    b.close_external(DeviceId(0), block).unwrap();
    framework_free(b, 0, block);
    peer.send("stale_key", stale_key.to_text());
    // A live export the peer did not make: it cannot grant it.
    let alloc = b.allocate(DeviceId(0), 1).unwrap();
    let token = b
        .export(&alloc, 0..64, ExportOptions::any_process())
        .unwrap();
    peer.send("token", token.to_text());

    // Local errors, while the peer works.
    assert!(matches!(
        b.allocate(DeviceId(2), 1),
        Err(Error::InvalidDevice {
            device: DeviceId(2),
            count: 2
        })
    ));
    assert!(matches!(
        b.allocate(DeviceId(0), 0),
        Err(Error::InvalidArgument { .. })
    ));
    let err = b
        .export(&alloc, 0..64, ExportOptions::granted_only())
        .unwrap_err();
    assert!(err.to_string().contains("one shareable handle"), "{err}");
    assert!(matches!(
        b.export(&alloc, 0..(alloc.size + 1), ExportOptions::any_process()),
        Err(Error::InvalidArgument { .. })
    ));
    let s = b.create_signal(DeviceId(1)).unwrap();
    b.destroy_signal(s.clone()).unwrap();
    assert!(matches!(
        b.notify(&s, RawStream::DEFAULT),
        Err(Error::UnknownHandle { .. })
    ));

    peer.recv("done");
    b.free(alloc).unwrap();
}

fn errors_b(b: &AscendBackend, peer: &mut Peer) {
    // A freed allocation: its export record is gone, so devipc refuses before the runtime.
    let stale = peer.recv_token("stale");
    let err = b.import(&stale, DeviceId(0)).unwrap_err();
    assert!(
        matches!(&err, Error::InvalidArgument { what } if what.contains("already freed")),
        "{err}"
    );
    // A key the exporter closed: its lease is gone, so devipc refuses before the runtime.
    let stale_key = peer.recv_token("stale_key");
    let err = b.import(&stale_key, DeviceId(0)).unwrap_err();
    assert!(
        matches!(&err, Error::InvalidArgument { what } if what.contains("already freed")),
        "{err}"
    );
    let token = peer.recv_token("token");
    // Only the exporter sets a trustlist: devipc refuses another process's token before
    // the runtime sees its handle (the runtime would answer DRV_NAME, rule
    // `ascend.ipc.only-exporter-sets-trustlist`, which conformance checks on the vendor ABI).
    let err = b.grant(&token, &[ProcessId(1)]).unwrap_err();
    assert!(
        matches!(&err, Error::InvalidArgument { what } if what.contains("only the process that exported memory can grant it")),
        "{err}"
    );

    // Bad device for the import.
    assert!(matches!(
        b.import(&token, DeviceId(7)),
        Err(Error::InvalidDevice { .. })
    ));
    // Another backend's token, and a token of the real runtime.
    let mut parts = token.to_parts();
    parts.mechanism = Mechanism::HipIpcMem;
    parts.payload = vec![0; 64];
    let hip = MemToken::new(parts).unwrap();
    assert!(matches!(
        b.import(&hip, DeviceId(0)),
        Err(Error::BackendMismatch { .. })
    ));
    let mut parts = token.to_parts();
    parts.emulated = false;
    let real = MemToken::new(parts).unwrap();
    let err = b.import(&real, DeviceId(0)).unwrap_err();
    assert!(
        matches!(&err, Error::BackendMismatch { found, .. } if found.contains("real ACL runtime")),
        "{err:?}"
    );
    let hip_signal = SignalToken::new(SignalTokenParts {
        mechanism: Mechanism::HipIpcEvent,
        emulated: true,
        device: DeviceId(0),
        physical: Default::default(),
        origin: token.origin(),
        generation: 1,
        payload: vec![0; 96],
    })
    .unwrap();
    assert!(matches!(
        b.import_signal(&hip_signal, DeviceId(0)),
        Err(Error::BackendMismatch { .. })
    ));
    // Corrupt tokens never reach the runtime.
    let text = token.to_text();
    let mut corrupt = text.clone().into_bytes();
    let i = corrupt.len() / 2;
    corrupt[i] = if corrupt[i] == b'A' { b'B' } else { b'A' };
    let corrupt = String::from_utf8(corrupt).unwrap();
    assert!(matches!(
        MemToken::from_text(&corrupt),
        Err(Error::InvalidToken { .. })
    ));
    assert!(matches!(
        MemToken::from_text(&text[..text.len() - 3]),
        Err(Error::InvalidToken { .. })
    ));
    // A working import, closed twice.
    let m = b.import(&token, DeviceId(0)).unwrap();
    b.close(m.clone()).unwrap();
    assert!(matches!(
        b.close(m),
        Err(Error::UnknownHandle {
            kind: "mapping",
            ..
        })
    ));
    peer.send("done", "");
}
