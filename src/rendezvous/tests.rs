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

// -- under load ---------------------------------------------------------------------

/// Serves until an exchange ends with a success; returns it and the errors before it.
fn serve_until_ok(server: &ShareServer) -> (PeerInfo, Vec<Error>) {
    let mut errors = Vec::new();
    loop {
        match server.accept_timeout(LONG) {
            Ok(peer) => return (peer, errors),
            Err(e @ Error::Timeout { .. }) if e.to_string().contains("waiting for") => {
                panic!("nothing was served: {e}")
            }
            Err(e) => errors.push(e),
        }
    }
}

/// Silent, trickling and half-finished peers hold connections while an importer comes:
/// it is served at once, not after their timeouts.
#[test]
fn idle_and_slow_peers_do_not_delay_an_importer() {
    let dir = Dir::new("crowd");
    let rt = probe_runtime();
    let buffer = rt.allocate(DeviceId(0), 64).unwrap();
    let timeout = Duration::from_secs(5);
    let server = buffer
        .share(dir.sock(), ShareOptions::new().io_timeout(timeout))
        .unwrap();
    let mut crowd: Vec<UnixStream> = (0..8)
        .map(|_| UnixStream::connect(dir.sock()).unwrap())
        .collect();
    let mut half = UnixStream::connect(dir.sock()).unwrap();
    half.write_all(MAGIC.as_bytes()).unwrap();
    crowd.push(half);
    let start = Instant::now();
    let (peer, _) = std::thread::scope(|s| {
        let served = s.spawn(|| serve_until_ok(&server));
        // A slowloris: one byte every 100 ms on one more connection, meanwhile.
        let trickler = s.spawn(|| {
            let mut c = UnixStream::connect(dir.sock()).unwrap();
            for b in MAGIC.bytes().take(10) {
                let _ = c.write_all(&[b]);
                std::thread::sleep(Duration::from_millis(100));
            }
            c
        });
        let connected = rt
            .connect_with(
                dir.sock(),
                DeviceId(0),
                ConnectOptions::new().timeout(Duration::from_secs(2)),
            )
            .unwrap();
        drop(connected);
        crowd.push(trickler.join().unwrap());
        served.join().unwrap()
    });
    assert_eq!(peer.process_id, ProcessId::current());
    assert!(
        start.elapsed() < timeout,
        "served after {:?}, not before the crowd's timeouts",
        start.elapsed()
    );
    // The crowd is still pending; once its time is up, each is an error of its own.
    drop(crowd.pop());
    let err = server.accept_timeout(LONG).unwrap_err();
    assert!(is_io(&err, io::ErrorKind::UnexpectedEof), "{err:?}");
}

/// Past the cap the oldest connection is closed, with a reply saying why and an error
/// from `accept`; the newest is served.
#[test]
fn the_oldest_connection_makes_room_past_the_cap() {
    let dir = Dir::new("cap");
    let rt = probe_runtime();
    let buffer = rt.allocate(DeviceId(0), 64).unwrap();
    let server = buffer.share(dir.sock(), ShareOptions::new()).unwrap();
    let extra = 3;
    let mut crowd: Vec<UnixStream> = (0..server::MAX_PENDING + extra)
        .map(|_| UnixStream::connect(dir.sock()).unwrap())
        .collect();
    let (peer, errors) = std::thread::scope(|s| {
        let served = s.spawn(|| serve_until_ok(&server));
        let connected = rt.connect(dir.sock(), DeviceId(0)).unwrap();
        drop(connected);
        served.join().unwrap()
    });
    assert_eq!(peer.process_id, ProcessId::current());
    // The crowd's first `extra`, and one more for the importer, were closed.
    assert_eq!(errors.len(), extra + 1, "{errors:?}");
    for e in &errors {
        assert!(is_io(e, io::ErrorKind::Other), "{e:?}");
        assert!(e.to_string().contains("the exporter is busy"), "{e}");
    }
    for (i, c) in crowd.iter_mut().enumerate() {
        c.set_read_timeout(Some(Duration::from_millis(if i <= extra {
            5000
        } else {
            1
        })))
        .unwrap();
        let mut reply = String::new();
        let got = c.read_to_string(&mut reply);
        if i <= extra {
            got.unwrap();
            assert!(
                reply.starts_with("ERR failed the exporter is busy: 64 connections"),
                "connection {i}: {reply:?}"
            );
        } else {
            assert!(
                got.is_err() && reply.is_empty(),
                "connection {i} still waits"
            );
        }
    }
}

/// An exchange that has not ended when `accept_timeout` gives up continues at the next
/// call; several threads in `accept` each get one outcome.
#[test]
fn exchanges_outlive_a_call_and_threads_share_the_loop() {
    let dir = Dir::new("threads");
    let rt = probe_runtime();
    let buffer = rt.allocate(DeviceId(0), 64).unwrap();
    let server = buffer.share(dir.sock(), ShareOptions::new()).unwrap();
    let hello = format!(
        "{MAGIC} {PROTOCOL_VERSION} pid={} backend=hip\n",
        std::process::id()
    );
    let (first, rest) = hello.split_at(10);
    let mut c = UnixStream::connect(dir.sock()).unwrap();
    c.write_all(first.as_bytes()).unwrap();
    let err = server
        .accept_timeout(Duration::from_millis(100))
        .unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err:?}");
    c.write_all(rest.as_bytes()).unwrap();
    let peer = server.accept_timeout(LONG).unwrap();
    assert_eq!(peer.process_id, ProcessId::current());
    let mut reply = String::new();
    c.read_to_string(&mut reply).unwrap();
    assert!(
        reply.starts_with("OK\n") && reply.ends_with("END\n"),
        "{reply}"
    );

    // Four threads, four importers: each thread returns one of them.
    let served = std::thread::scope(|s| {
        let threads: Vec<_> = (0..4)
            .map(|_| s.spawn(|| server.accept_timeout(LONG)))
            .collect();
        let importers: Vec<_> = (0..4)
            .map(|_| s.spawn(|| rt.connect(dir.sock(), DeviceId(0)).map(drop)))
            .collect();
        for i in importers {
            i.join().unwrap().unwrap();
        }
        threads
            .into_iter()
            .map(|t| t.join().unwrap())
            .collect::<Vec<_>>()
    });
    assert!(served.iter().all(|p| p.is_ok()), "{served:?}");
    assert_eq!(probe(&rt).count("grant"), 5);
    // A short waiter does not wait for a thread that drives without a limit.
    std::thread::scope(|s| {
        s.spawn(|| {
            let err = server.accept_timeout(Duration::from_millis(200));
            assert!(matches!(err, Err(Error::Timeout { .. })), "{err:?}");
        });
        let long = s.spawn(|| server.accept_timeout(LONG));
        std::thread::sleep(Duration::from_millis(400));
        rt.connect(dir.sock(), DeviceId(0)).unwrap();
        long.join().unwrap().unwrap();
    });
}

/// An exporter whose queue of connections is full (flooded while not in `accept`):
/// the importer gives up at its timeout instead of waiting in `connect` for ever, and
/// another exporter at the path sees it is live.
#[test]
fn a_full_queue_times_the_importer_out() {
    const TEST: &str = "a_full_queue_times_the_importer_out";
    // Filling the queue takes as many descriptors as it holds (std listens with the
    // system's maximum, `somaxconn`); leave plenty to the tests running beside this one.
    let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    let queue: usize = read("/proc/sys/net/core/somaxconn")
        .trim()
        .parse()
        .unwrap_or(usize::MAX);
    let open_files: usize = read("/proc/self/limits")
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3).map(str::to_owned))
        .and_then(|soft| soft.parse().ok())
        .unwrap_or(usize::MAX);
    if queue.saturating_add(1000) > open_files {
        devipc_testkit::skip(
            TEST,
            &format!("a queue of {queue} needs more than {open_files} open files"),
        );
        return;
    }
    let dir = Dir::new("full-queue");
    let listener = UnixListener::bind(dir.sock()).unwrap();
    let mut queued = Vec::new();
    let full = loop {
        match os::connect_unix_nonblocking(&dir.sock()) {
            Ok(s) => queued.push(s),
            Err(e) => break e,
        }
        assert!(queued.len() < 100_000, "the queue never filled");
    };
    if full.kind() != io::ErrorKind::WouldBlock {
        // Most likely out of descriptors (a low `ulimit -n`) before the queue filled.
        devipc_testkit::skip(
            TEST,
            &format!(
                "could not fill the listener's queue ({} connections): {full}",
                queued.len()
            ),
        );
        return;
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let path = dir.sock();
    std::thread::spawn(move || {
        let rt = probe_runtime();
        let opts = ConnectOptions::new().timeout(Duration::from_millis(300));
        let start = Instant::now();
        let result = rt.connect_with(path, DeviceId(0), opts).map(drop);
        let _ = tx.send((result, start.elapsed()));
    });
    let (result, took) = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("connect waited far past its timeout");
    let err = result.unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err:?}");
    assert!(err.to_string().contains("queue"), "{err}");
    assert!(took < Duration::from_secs(5), "{took:?}");

    let rt = probe_runtime();
    let buffer = rt.allocate(DeviceId(0), 64).unwrap();
    let err = buffer.share(dir.sock(), ShareOptions::new()).unwrap_err();
    assert!(is_io(&err, io::ErrorKind::AddrInUse), "{err:?}");
    drop((queued, listener));
}

/// Long paths work through `share` and `connect`; unreachable ones are refused by
/// both, before anything is exported.
#[test]
fn long_paths_are_shared_and_unreachable_ones_refused() {
    let dir = Dir::new("long");
    let mut deep = dir.0.clone();
    while deep.as_os_str().len() < 200 {
        deep.push("d".repeat(60));
    }
    std::fs::create_dir_all(&deep).unwrap();
    let rt = probe_runtime();
    let buffer = rt.allocate(DeviceId(0), 64).unwrap();
    let path = deep.join("rdv.sock");
    let server = buffer.share(&path, ShareOptions::new()).unwrap();
    assert_eq!(server.path(), path);
    std::thread::scope(|s| {
        let served = s.spawn(|| server.accept_timeout(LONG));
        rt.connect(&path, DeviceId(0)).unwrap();
        served.join().unwrap().unwrap();
    });
    drop(server);
    assert!(!path.exists());

    let exports = probe(&rt).count("export");
    let unreachable = deep.join("n".repeat(socket_path::MAX_NAME + 1));
    let err = buffer.share(&unreachable, ShareOptions::new()).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    assert!(
        err.to_string().contains("too long for a Unix socket"),
        "{err}"
    );
    assert_eq!(
        probe(&rt).count("export"),
        exports,
        "refused before exporting"
    );
    let err = rt.connect(&unreachable, DeviceId(0)).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
}

// -- the socket file ----------------------------------------------------------------

#[test]
fn a_stale_socket_is_replaced_and_other_files_are_refused() {
    let dir = Dir::new("paths");
    let rt = probe_runtime();
    let buffer = rt.allocate(DeviceId(0), 64).unwrap();
    let path = dir.sock();

    // Stale: a socket nobody listens on (its server died without cleaning up).
    drop(UnixListener::bind(&path).unwrap());
    assert!(path.exists());
    let server = buffer.share(&path, ShareOptions::new()).unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);

    // Live: refused, and the live server's socket stays.
    let err = buffer.share(&path, ShareOptions::new()).unwrap_err();
    assert!(is_io(&err, io::ErrorKind::AddrInUse), "{err:?}");
    assert!(path.exists());
    // (The probe connection above reached the live server; it was never accepted.)
    drop(server);
    assert!(!path.exists());

    // Not a socket: refused and left alone.
    std::fs::write(&path, b"precious").unwrap();
    let err = buffer.share(&path, ShareOptions::new()).unwrap_err();
    assert!(is_io(&err, io::ErrorKind::AlreadyExists), "{err:?}");
    assert!(err.to_string().contains("regular file"), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), b"precious");
    std::fs::remove_file(&path).unwrap();
    std::fs::create_dir(&path).unwrap();
    let err = buffer.share(&path, ShareOptions::new()).unwrap_err();
    assert!(err.to_string().contains("directory"), "{err}");
    std::fs::remove_dir(&path).unwrap();
    std::os::unix::fs::symlink(dir.0.join("elsewhere"), &path).unwrap();
    let err = buffer.share(&path, ShareOptions::new()).unwrap_err();
    assert!(err.to_string().contains("symbolic link"), "{err}");
    std::fs::remove_file(&path).unwrap();
    assert!(dir.names().is_empty(), "{:?}", dir.names());

    // A missing directory is an I/O error naming the path.
    let err = buffer
        .share(dir.0.join("missing/rdv.sock"), ShareOptions::new())
        .unwrap_err();
    assert!(is_io(&err, io::ErrorKind::NotFound), "{err:?}");
}

#[test]
fn drop_removes_only_its_own_socket() {
    let dir = Dir::new("drop");
    let rt = probe_runtime();
    let buffer = rt.allocate(DeviceId(0), 64).unwrap();
    let server = buffer.share(dir.sock(), ShareOptions::new()).unwrap();
    // Someone replaced the socket file: the server must not remove theirs.
    std::fs::remove_file(dir.sock()).unwrap();
    std::fs::write(dir.sock(), b"theirs").unwrap();
    drop(server);
    assert_eq!(std::fs::read(dir.sock()).unwrap(), b"theirs");
    std::fs::remove_file(dir.sock()).unwrap();
    // A relative path is resolved once, so a later chdir does not matter.
    let server = buffer.share(dir.sock(), ShareOptions::new()).unwrap();
    assert!(server.path().is_absolute());
    drop(server);
    assert!(dir.names().is_empty());
}

// -- the importer's side ------------------------------------------------------------

#[test]
fn connecting_to_nothing_fails_or_waits_for_the_exporter() {
    let dir = Dir::new("connect");
    let rt = probe_runtime();
    let err = rt.connect(dir.sock(), DeviceId(0)).unwrap_err();
    assert!(is_io(&err, io::ErrorKind::NotFound), "{err:?}");
    drop(UnixListener::bind(dir.sock()).unwrap());
    let err = rt.connect(dir.sock(), DeviceId(0)).unwrap_err();
    assert!(is_io(&err, io::ErrorKind::ConnectionRefused), "{err:?}");
    std::fs::remove_file(dir.sock()).unwrap();

    let waiting = ConnectOptions::new()
        .wait_for_server(true)
        .timeout(Duration::from_millis(100));
    let err = rt
        .connect_with(dir.sock(), DeviceId(0), waiting)
        .unwrap_err();
    assert!(matches!(err, Error::Timeout { .. }), "{err:?}");

    // The exporter shows up while the importer waits.
    let buffer = rt.allocate(DeviceId(0), 64).unwrap();
    std::thread::scope(|s| {
        let importer = s.spawn(|| {
            rt.connect_with(
                dir.sock(),
                DeviceId(0),
                ConnectOptions::new().wait_for_server(true),
            )
        });
        std::thread::sleep(Duration::from_millis(100));
        let server = buffer.share(dir.sock(), ShareOptions::new()).unwrap();
        server.accept_timeout(LONG).unwrap();
        importer.join().unwrap().unwrap();
    });
}

/// An exporter that refuses before reading the hello (as for a uid it does not
/// accept) and closes: the importer reports the refusal, not a broken pipe.
#[test]
fn a_refusal_before_the_hello_reaches_the_importer() {
    let dir = Dir::new("early-refusal");
    let rt = probe_runtime();
    let listener = UnixListener::bind(dir.sock()).unwrap();
    for _ in 0..20 {
        std::thread::scope(|s| {
            let fake = s.spawn(|| {
                let (mut conn, _) = listener.accept().unwrap();
                conn.write_all(b"ERR denied uid 1234 may not import\n")
                    .unwrap();
            });
            let err = rt.connect(dir.sock(), DeviceId(0)).unwrap_err();
            assert!(is_io(&err, io::ErrorKind::PermissionDenied), "{err:?}");
            assert!(err.to_string().contains("uid 1234 may not import"), "{err}");
            fake.join().unwrap();
        });
    }
}

/// Fake exporters: each answers the hello with `reply` and closes (or stays silent).
#[test]
fn an_exporter_that_breaks_the_protocol_is_a_typed_error() {
    let dir = Dir::new("fake-exporter");
    let rt = probe_runtime();
    let listener = UnixListener::bind(dir.sock()).unwrap();
    let fast = ConnectOptions::new().timeout(Duration::from_millis(300));
    let sig = format!("signal {}\n", signal_token(1));
    let many = format!(
        "OK\nmem {}\n{}END\n",
        mem_token(),
        sig.repeat(MAX_SIGNALS + 1)
    );
    type Check = fn(&Error) -> bool;
    let cases: Vec<(String, Check)> = vec![
        ("hello?\n".into(), |e| {
            matches!(e, Error::InvalidArgument { .. })
        }),
        ("OK\nmem devipc3:AAAA\n".into(), |e| {
            matches!(e, Error::InvalidToken { .. })
        }),
        (format!("OK\n{}\n", "x".repeat(MAX_LINE + 1)), |e| {
            matches!(e, Error::InvalidArgument { .. })
        }),
        (many, |e| e.to_string().contains("more than 64 signals")),
        // Cut short, and silent: EOF, then a timeout.
        (format!("OK\nmem {}\n", mem_token()), |e| {
            is_io(e, io::ErrorKind::UnexpectedEof)
        }),
        (String::new(), |e| matches!(e, Error::Timeout { .. })),
    ];
    for (reply, check) in cases {
        std::thread::scope(|s| {
            let fake = s.spawn(|| {
                let (mut conn, _) = listener.accept().unwrap();
                let mut hello = [0u8; 256];
                let _ = conn.read(&mut hello).unwrap();
                if reply.is_empty() {
                    // Silent until the importer gives up and closes.
                    let _ = conn.read(&mut hello);
                } else {
                    let _ = conn.write_all(reply.as_bytes());
                }
            });
            let err = rt
                .connect_with(dir.sock(), DeviceId(0), fast.clone())
                .unwrap_err();
            assert!(check(&err), "reply {:.80?}: {err:?}", reply);
            fake.join().unwrap();
        });
    }
}
