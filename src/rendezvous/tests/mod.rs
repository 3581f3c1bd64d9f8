//! The exporter and the importer together, in one process; the fixtures the other
//! modules' tests share.

use std::io::{self, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use devipc_core::token::{MemTokenParts, SignalTokenParts};
use devipc_core::{
    BackendKind, DeviceId, Error, ExportOptions, Mechanism, MemToken, ProcessId, SignalToken,
    TokenOrigin,
};
use devipc_shm::os;

use super::*;
use crate::raw::Backend;
use crate::recording_backend::RecordingBackend;
use crate::runtime::Runtime;

mod load;
mod socket_file;

const LONG: Duration = Duration::from_secs(30);

/// A private directory for one test's sockets, removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let dir = std::env::temp_dir().join(format!("devipc-rdv-ut-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Dir(dir)
    }

    fn sock(&self) -> PathBuf {
        self.0.join("rdv.sock")
    }

    /// Every name in the directory, sorted.
    fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&self.0)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A probe runtime of `kind` with process id `pid` and its own token identity.
fn probe_runtime_as(kind: BackendKind, pid: ProcessId) -> Runtime {
    // Distinct payloads keep this test's exports apart from other tests' in the
    // process-wide table of local exports.
    static NEXT: AtomicU8 = AtomicU8::new(100);
    let payload = NEXT.fetch_add(1, Ordering::Relaxed);
    Runtime::from_backend(Backend::from(RecordingBackend::with_identity(
        kind, pid, payload,
    )))
}

/// A probe runtime whose process ids are this process's kernel pid (strict checks).
pub(super) fn probe_runtime() -> Runtime {
    probe_runtime_as(BackendKind::Hip, ProcessId::current())
}

fn probe(rt: &Runtime) -> &RecordingBackend {
    match rt.backend() {
        Backend::Recording(p) => p,
        #[allow(unreachable_patterns, reason = "other variants exist per feature")]
        _ => unreachable!("probe runtime"),
    }
}

pub(super) fn mem_token() -> MemToken {
    MemToken::new(MemTokenParts {
        mechanism: Mechanism::HipIpcMem,
        emulated: true,
        device: DeviceId(0),
        physical: Default::default(),
        origin: TokenOrigin::current(ProcessId(42)),
        generation: 3,
        object_size: 4096,
        offset: 0,
        len: 4096,
        payload: vec![5; 64],
    })
    .unwrap()
}

pub(super) fn signal_token(fill: u8) -> SignalToken {
    SignalToken::new(SignalTokenParts {
        mechanism: Mechanism::HipIpcEvent,
        emulated: true,
        device: DeviceId(0),
        physical: Default::default(),
        origin: TokenOrigin::current(ProcessId(42)),
        generation: 1,
        payload: vec![fill; 72],
    })
    .unwrap()
}

/// Sends `bytes` on a raw connection to `path` and returns the whole reply.
fn raw_exchange(path: &Path, bytes: &[u8]) -> String {
    let mut s = UnixStream::connect(path).unwrap();
    s.set_read_timeout(Some(LONG)).unwrap();
    s.write_all(bytes).unwrap();
    let mut reply = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match s.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => reply.extend_from_slice(&chunk[..n]),
            // A server that closes with our bytes still unread resets the connection
            // after its reply instead of ending it.
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("reading the reply: {e}"),
        }
    }
    String::from_utf8(reply).unwrap()
}

pub(super) fn is_io(err: &Error, kind: io::ErrorKind) -> bool {
    matches!(err, Error::Io { source, .. } if source.kind() == kind)
}

// -- exporter and importer, in one process ------------------------------------------

#[test]
fn a_buffer_and_its_signals_reach_the_importer() {
    let dir = Dir::new("roundtrip");
    let rt = probe_runtime();
    let buffer = rt.allocate(DeviceId(0), 64).unwrap();
    let (s1, s2) = (
        rt.create_signal(DeviceId(0)).unwrap(),
        rt.create_signal(DeviceId(1)).unwrap(),
    );
    let server = buffer
        .share(dir.sock(), ShareOptions::new())
        .unwrap()
        .with_signal(&s1)
        .unwrap()
        .with_signal(&s2)
        .unwrap();
    assert!(server.path().is_absolute());
    assert_eq!(server.signal_tokens().len(), 2);
    let mode = std::fs::metadata(dir.sock()).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    assert_eq!(dir.names(), ["rdv.sock"], "no temporary socket left");

    let (peer, connected) = std::thread::scope(|s| {
        let served = s.spawn(|| server.accept_timeout(LONG));
        let connected = rt.connect(dir.sock(), DeviceId(1)).unwrap();
        (served.join().unwrap().unwrap(), connected)
    });
    assert_eq!(peer.process_id, ProcessId::current());
    assert_eq!(peer.pid_check, PidCheck::Verified);
    assert_eq!(peer.credentials.pid, std::process::id());
    assert_eq!(peer.credentials.uid, os::effective_uid());
    assert_eq!(connected.exporter.pid, std::process::id());
    assert_eq!(connected.signals.len(), 2);
    // Our own export: the same-process shortcut, through the rendezvous.
    assert!(connected.buffer.is_local());
    assert_eq!(connected.buffer.device(), DeviceId(1));
    let p = probe(&rt);
    assert_eq!(p.count("export"), 1);
    assert_eq!(p.count("export_signal"), 2);
    assert_eq!(p.count("grant"), 1);
    assert_eq!(p.count("grant_signal"), 2);
    // Our own signals too: shared locally, no vendor import.
    assert_eq!(p.count("import_signal"), 0);

    drop(server);
    assert!(dir.names().is_empty(), "the socket outlived its server");
    // The importer's buffer keeps the exporter's memory alive (same process here).
    drop(buffer);
    assert_eq!(p.count("free"), 0);
    drop(connected);
    assert_eq!(p.count("free"), 1);
}

/// Serves one misbehaving client at a time and checks the server's error and the
/// client's reply, then that a well-behaved importer is still served.
#[test]
fn a_bad_client_gets_an_error_and_the_server_serves_the_next() {
    let dir = Dir::new("bad-clients");
    let rt = probe_runtime();
    let buffer = rt.allocate(DeviceId(0), 64).unwrap();
    let server = buffer
        .share(
            dir.sock(),
            ShareOptions::new().io_timeout(Duration::from_millis(300)),
        )
        .unwrap();
    let me = std::process::id();
    let hello = |pid: u32, backend: &str| {
        format!("{MAGIC} {PROTOCOL_VERSION} pid={pid} backend={backend}\n").into_bytes()
    };
    let overlong = vec![b'A'; 4 * MAX_LINE];
    type Check = fn(&Error) -> bool;
    let cases: Vec<(&str, Vec<u8>, &str, Check)> = vec![
        (
            "a liar",
            hello(me + 1, "hip"),
            "ERR denied the importer claims process",
            |e| is_io(e, io::ErrorKind::PermissionDenied) && e.to_string().contains("kernel says"),
        ),
        (
            "garbage",
            b"\x00\x01binary\n".to_vec(),
            "ERR protocol the hello contains byte 0x00",
            |e| matches!(e, Error::InvalidArgument { .. }),
        ),
        (
            "another protocol",
            b"GET / HTTP/1.1\n".to_vec(),
            "ERR protocol not a devipc rendezvous hello",
            |e| matches!(e, Error::InvalidArgument { .. }),
        ),
        (
            "an overlong line",
            overlong,
            "ERR protocol the hello is longer than 1024 bytes",
            |e| matches!(e, Error::InvalidArgument { .. }),
        ),
        (
            "a newer version",
            format!("{MAGIC} 2 pid={me} backend=hip\n").into_bytes(),
            "ERR protocol unsupported protocol version 2",
            |e| matches!(e, Error::InvalidArgument { .. }),
        ),
        (
            "another backend",
            hello(me, "ascend"),
            "ERR backend this exporter runs hip, the importer runs ascend",
            |e| matches!(e, Error::BackendMismatch { .. }),
        ),
        (
            "silence",
            Vec::new(),
            "ERR protocol the hello did not complete within",
            |e| matches!(e, Error::Timeout { .. }),
        ),
        (
            "half a hello",
            format!("{MAGIC} 1 pid=").into_bytes(),
            "ERR protocol the hello did not complete within",
            |e| matches!(e, Error::Timeout { .. }),
        ),
    ];
    for (what, bytes, want_reply, check) in cases {
        let (served, reply) = std::thread::scope(|s| {
            let served = s.spawn(|| server.accept_timeout(LONG));
            let reply = raw_exchange(server.path(), &bytes);
            (served.join().unwrap(), reply)
        });
        let err = served.unwrap_err();
        assert!(check(&err), "{what}: unexpected server error {err:?}");
        assert!(
            reply.starts_with(want_reply) && reply.ends_with('\n') && reply.lines().count() == 1,
            "{what}: reply {reply:?}"
        );
    }

    // A client that leaves in the middle of its hello.
    std::thread::scope(|s| {
        let served = s.spawn(|| server.accept_timeout(LONG));
        let mut c = UnixStream::connect(server.path()).unwrap();
        c.write_all(MAGIC.as_bytes()).unwrap();
        drop(c);
        let err = served.join().unwrap().unwrap_err();
        assert!(is_io(&err, io::ErrorKind::UnexpectedEof), "{err:?}");
    });
    // One that connects and leaves without a byte (a liveness probe, such as another
    // exporter's at the same path) is no importer: accept keeps waiting.
    drop(UnixStream::connect(server.path()).unwrap());
    let err = server
        .accept_timeout(Duration::from_millis(200))
        .unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err:?}");

    assert_eq!(probe(&rt).count("grant"), 0, "nobody was granted");
    let (peer, connected) = std::thread::scope(|s| {
        let served = s.spawn(|| server.accept_timeout(LONG));
        let connected = rt.connect(server.path(), DeviceId(0)).unwrap();
        (served.join().unwrap().unwrap(), connected)
    });
    assert_eq!(peer.process_id, ProcessId::current());
    assert!(connected.signals.is_empty());
    assert_eq!(probe(&rt).count("grant"), 1);
}

#[test]
fn the_importer_sees_the_exporters_refusal_as_a_typed_error() {
    let dir = Dir::new("refused");
    // Exporter on ascend, importer on hip.
    let exporter = probe_runtime_as(BackendKind::Ascend, ProcessId::current());
    let buffer = exporter.allocate(DeviceId(0), 64).unwrap();
    let server = buffer.share(dir.sock(), ShareOptions::new()).unwrap();
    let importer = probe_runtime();
    std::thread::scope(|s| {
        let served = s.spawn(|| server.accept_timeout(LONG));
        let err = importer.connect(dir.sock(), DeviceId(0)).unwrap_err();
        assert!(matches!(err, Error::BackendMismatch { .. }), "{err:?}");
        assert!(err.to_string().contains("exporter runs ascend"), "{err}");
        let served = served.join().unwrap().unwrap_err();
        assert!(
            matches!(served, Error::BackendMismatch { .. }),
            "{served:?}"
        );
    });
}

/// Ascend in a container: the exporter's process ids are host pids, so a claim that
/// differs from the socket pid is granted, marked unverified.
#[test]
fn host_pid_claims_are_granted_unverified_when_pids_are_not_kernel_pids() {
    let dir = Dir::new("host-pids");
    let rt = probe_runtime_as(BackendKind::Hip, ProcessId(std::process::id() + 1000));
    let buffer = rt.allocate(DeviceId(0), 64).unwrap();
    let signal = rt.create_signal(DeviceId(0)).unwrap();
    let server = buffer
        .share(dir.sock(), ShareOptions::new())
        .unwrap()
        .with_signal(&signal)
        .unwrap();
    let reply = std::thread::scope(|s| {
        let served = s.spawn(|| server.accept_timeout(LONG));
        let reply = raw_exchange(
            server.path(),
            format!("{MAGIC} 1 pid=77777 backend=hip\n").as_bytes(),
        );
        let peer = served.join().unwrap().unwrap();
        assert_eq!(peer.process_id, ProcessId(77777));
        assert_eq!(peer.pid_check, PidCheck::Unverified);
        reply
    });
    let lines: Vec<&str> = reply.lines().collect();
    assert_eq!(lines.len(), 4, "{reply}");
    assert_eq!(lines[0], "OK");
    assert_eq!(lines[1], format!("mem {}", server.token()));
    assert_eq!(lines[3], "END");
    assert_eq!(probe(&rt).count("grant"), 1);
    assert_eq!(probe(&rt).count("grant_signal"), 1);

    // A real importer of this exporter goes through the vendor import (the token is
    // not its own), and is granted under its own (kernel) pid.
    let importer = probe_runtime();
    let connected = std::thread::scope(|s| {
        let served = s.spawn(|| server.accept_timeout(LONG));
        let connected = importer.connect(dir.sock(), DeviceId(0)).unwrap();
        let peer = served.join().unwrap().unwrap();
        assert_eq!(peer.pid_check, PidCheck::Verified);
        connected
    });
    assert!(!connected.buffer.is_local());
    assert_eq!(probe(&importer).count("import"), 1);
    assert_eq!(probe(&importer).count("import_signal"), 1);
}

#[test]
fn any_process_exports_are_handed_out_without_grants() {
    let dir = Dir::new("any-process");
    let rt = probe_runtime();
    let buffer = rt.allocate(DeviceId(0), 64).unwrap();
    let signal = rt.create_signal(DeviceId(0)).unwrap();
    let server = buffer
        .share(
            dir.sock(),
            ShareOptions::new().export_options(ExportOptions::any_process()),
        )
        .unwrap()
        .with_signal(&signal)
        .unwrap();
    std::thread::scope(|s| {
        let served = s.spawn(|| server.accept_timeout(LONG));
        let connected = rt.connect(dir.sock(), DeviceId(0)).unwrap();
        served.join().unwrap().unwrap();
        assert_eq!(connected.signals.len(), 1);
    });
    assert_eq!(probe(&rt).count("grant"), 0);
    assert_eq!(probe(&rt).count("grant_signal"), 0);
}

#[test]
fn signals_must_match_the_buffers_backend_and_are_bounded() {
    let dir = Dir::new("signals");
    let rt = probe_runtime();
    let buffer = rt.allocate(DeviceId(0), 64).unwrap();
    let mut server = buffer.share(dir.sock(), ShareOptions::new()).unwrap();
    let ascend = probe_runtime_as(BackendKind::Ascend, ProcessId::current());
    let foreign = ascend.create_signal(DeviceId(0)).unwrap();
    let err = server.add_signal(&foreign).unwrap_err();
    assert!(matches!(err, Error::BackendMismatch { .. }), "{err:?}");
    let signal = rt.create_signal(DeviceId(0)).unwrap();
    for _ in 0..MAX_SIGNALS {
        server.add_signal(&signal).unwrap();
    }
    let err = server.add_signal(&signal).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
}

#[test]
fn options_are_validated() {
    let dir = Dir::new("options");
    let rt = probe_runtime();
    let buffer = rt.allocate(DeviceId(0), 64).unwrap();
    for opts in [
        ShareOptions::new().io_timeout(Duration::ZERO),
        ShareOptions::new().socket_mode(0o4600),
    ] {
        let err = buffer.share(dir.sock(), opts).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    }
    let err = rt
        .connect_with(
            dir.sock(),
            DeviceId(0),
            ConnectOptions::new().timeout(Duration::ZERO),
        )
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    let err = buffer.share("/", ShareOptions::new()).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    assert!(dir.names().is_empty());
    // A wider mode when other uids are allowed.
    let server = buffer
        .share(dir.sock(), ShareOptions::new().socket_mode(0o660))
        .unwrap();
    let mode = std::fs::metadata(server.path())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o660);
}

#[test]
fn accept_times_out_without_an_importer() {
    let dir = Dir::new("accept-timeout");
    let rt = probe_runtime();
    let buffer = rt.allocate(DeviceId(0), 64).unwrap();
    let server = buffer.share(dir.sock(), ShareOptions::new()).unwrap();
    let start = Instant::now();
    let err = server
        .accept_timeout(Duration::from_millis(100))
        .unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err:?}");
    assert!(start.elapsed() >= Duration::from_millis(100));
}
