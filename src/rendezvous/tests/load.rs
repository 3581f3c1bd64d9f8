//! The exporter under load: idle, slow and flooding peers, the connection cap, several
//! threads in `accept`, long paths.

use super::*;

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
