//! The socket file (stale sockets, other files, removal on drop) and the importer's side.

use super::*;

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
