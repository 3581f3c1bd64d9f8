//! The rendezvous (`SharedBuffer::share` / `Runtime::connect`) between real processes, on
//! both emulated backends.
//!
//! The emulator reads its configuration from the environment once per process, so the
//! parent only orchestrates: exporters, importers and misbehaving clients are children
//! (this test binary re-run on `child_role`, see `devipc-testkit`), each with the test's
//! own `DEVIPC_EMU_DIR` / `DEVIPC_RUNTIME_DIR`. The exporter child is driven by commands
//! on its stdin (`accept`, `accept-until <pid>`, `fds`, `pingpong <n>`, `drop`, `exit`)
//! and reports each outcome; the socket lives in the test's root directory unless a test
//! names another path. On emulated Ascend the trustlists are
//! enforced, so a successful import proves the rendezvous granted the importer.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use devipc::rendezvous::{ConnectOptions, PidCheck, ShareOptions};
use devipc::rendezvous::{MAGIC, MAX_LINE, PROTOCOL_VERSION};
use devipc::{BackendKind, DeviceId, Error, Runtime};
use devipc_testkit::{Child, LONG, Parent, TestRoot, child_entry};

/// The backend a child runs (`ascend` or `hip`).
const KIND_ENV: &str = "RDV_TEST_KIND";
/// The socket path a child serves or connects to.
const SOCK_ENV: &str = "RDV_TEST_SOCK";
/// The exporter's per-importer timeout, in milliseconds.
const IO_TIMEOUT_ENV: &str = "RDV_TEST_IO_TIMEOUT_MS";
/// The exporter's socket mode, in octal.
const SOCKET_MODE_ENV: &str = "RDV_TEST_SOCKET_MODE";
/// A `timed-importer`'s whole-rendezvous timeout, in milliseconds.
const CONNECT_TIMEOUT_ENV: &str = "RDV_TEST_CONNECT_TIMEOUT_MS";
/// What the exporter writes at offset 16 for importers to find.
const PATTERN: &[u8] = b"through the rendezvous";
const SIZE: usize = 1 << 16;

// ---------------------------------------------------------------------------------------
// Child roles.

#[test]
fn child_role() {
    devipc_testkit::run_child(|role, parent| {
        let result = match role {
            "exporter" => exporter(parent),
            "importer" => importer(parent),
            "timed-importer" => timed_importer(parent),
            "hold" => hold(parent),
            "share-at" => share_at(parent),
            "raw" => raw_client(parent),
            "thief" => thief(parent),
            "refused-importer" => refused_importer(parent),
            other => Err(format!("unknown role {other}").into()),
        };
        result.map_err(|e| e.to_string())
    });
}

type AnyResult<T> = Result<T, Box<dyn std::error::Error>>;

fn env(name: &str) -> AnyResult<String> {
    std::env::var(name).map_err(|e| format!("{name}: {e}").into())
}

fn child_runtime() -> AnyResult<Runtime> {
    Ok(Runtime::emulated(env(KIND_ENV)?.parse()?)?)
}

/// A short name for how an exporter's `accept` failed.
fn category(e: &Error) -> &'static str {
    match e {
        Error::Timeout { .. } => "timeout",
        Error::InvalidArgument { .. } => "protocol",
        Error::BackendMismatch { .. } => "backend",
        Error::Io { source, .. } => match source.kind() {
            std::io::ErrorKind::PermissionDenied => "denied",
            std::io::ErrorKind::UnexpectedEof => "eof",
            _ => "io",
        },
        _ => "other",
    }
}

/// Shares a buffer (pattern at offset 16) with two signals, `ping` then `pong`, and
/// follows the parent's commands.
fn exporter(parent: &Parent) -> AnyResult<()> {
    let rt = child_runtime()?;
    let device = DeviceId(0);
    let buffer = rt.allocate(device, SIZE)?;
    buffer.write(16, PATTERN)?;
    let ping = rt.create_signal(device)?;
    let pong = rt.create_signal(device)?;
    let mut opts = ShareOptions::new();
    if let Ok(ms) = env(IO_TIMEOUT_ENV) {
        opts = opts.io_timeout(Duration::from_millis(ms.parse()?));
    }
    if let Ok(mode) = env(SOCKET_MODE_ENV) {
        opts = opts.socket_mode(u32::from_str_radix(&mode, 8)?);
    }
    let mut server = Some(
        buffer
            .share(env(SOCK_ENV)?, opts)?
            .with_signal(&ping)?
            .with_signal(&pong)?,
    );
    parent.say("ready", &format!("{} {}", rt.process_id(), buffer.len()));
    loop {
        let command = parent.hear();
        let mut words = command.split(' ');
        match words.next().unwrap_or("") {
            "accept" => {
                let server = server.as_ref().ok_or("accept after drop")?;
                match server.accept_timeout(LONG) {
                    Ok(peer) => {
                        let check = match peer.pid_check {
                            PidCheck::Verified => "verified",
                            PidCheck::Unverified => "unverified",
                        };
                        parent.say(
                            "served",
                            &format!("{} {} {check}", peer.process_id, peer.credentials.pid),
                        );
                    }
                    Err(e) => parent.say("refused", &format!("{} {e}", category(&e))),
                }
            }
            // Serves until the importer with process id <pid> is served, however many
            // other connections end first (refused, timed out, or served).
            "accept-until" => {
                let server = server.as_ref().ok_or("accept after drop")?;
                let want: u32 = words.next().ok_or("accept-until needs a pid")?.parse()?;
                let mut others = 0u32;
                loop {
                    match server.accept_timeout(LONG) {
                        Ok(peer) if peer.process_id.0 == want => {
                            parent.say(
                                "until",
                                &format!("{others} {} {}", peer.process_id, peer.credentials.pid),
                            );
                            break;
                        }
                        Ok(_) => others += 1,
                        // Waiting itself timed out: the importer never completed.
                        Err(Error::Timeout { what, .. }) if what.contains("waiting for") => {
                            parent.say("refused", &format!("timeout {what}"));
                            break;
                        }
                        Err(_) => others += 1,
                    }
                }
            }
            // How many file descriptors this process has open.
            "fds" => {
                let n = std::fs::read_dir("/proc/self/fd")?.count();
                parent.say("fds", &n.to_string());
            }
            "pingpong" => {
                let n: u64 = words.next().ok_or("pingpong needs a number")?.parse()?;
                buffer.write(0, &n.to_le_bytes())?;
                ping.notify()?;
                pong.wait(Some(LONG))?;
                let mut answer = [0u8; 8];
                buffer.read(8, &mut answer)?;
                parent.say("answer", &u64::from_le_bytes(answer).to_string());
            }
            "token" => {
                let server = server.as_ref().ok_or("token after drop")?;
                parent.say("token", &server.token().to_string());
            }
            "drop" => {
                server = None;
                parent.say("dropped", "");
            }
            "exit" | "" => return Ok(()),
            other => return Err(format!("unknown command {other:?}").into()),
        }
    }
}

/// Connects, checks the pattern, then answers `ping` rounds (value doubled at offset 8,
/// then `pong`) until the parent says `exit`.
fn importer(parent: &Parent) -> AnyResult<()> {
    let rt = child_runtime()?;
    let connected = rt.connect(env(SOCK_ENV)?, DeviceId(0))?;
    let mut seen = vec![0u8; PATTERN.len()];
    connected.buffer.read(16, &mut seen)?;
    if seen != PATTERN {
        return Err(format!("read {seen:?} through the import, expected the pattern").into());
    }
    let [ping, pong] = &connected.signals[..] else {
        return Err(format!("{} signals, expected 2", connected.signals.len()).into());
    };
    parent.say(
        "imported",
        &format!(
            "{} {} {}",
            connected.buffer.len(),
            rt.process_id(),
            connected.exporter.pid
        ),
    );
    while parent.hear() == "round" {
        ping.wait(Some(LONG))?;
        let mut value = [0u8; 8];
        connected.buffer.read(0, &mut value)?;
        let doubled = 2 * u64::from_le_bytes(value);
        connected.buffer.write(8, &doubled.to_le_bytes())?;
        pong.notify()?;
    }
    Ok(())
}

/// Waits for `go`, then connects with the timeout in [`CONNECT_TIMEOUT_ENV`] and reports
/// how long the whole rendezvous took, or its error.
fn timed_importer(parent: &Parent) -> AnyResult<()> {
    let rt = child_runtime()?;
    let timeout = Duration::from_millis(env(CONNECT_TIMEOUT_ENV)?.parse()?);
    parent.hear_exactly("go")?;
    let start = Instant::now();
    let result = rt.connect_with(
        env(SOCK_ENV)?,
        DeviceId(0),
        ConnectOptions::new().timeout(timeout),
    );
    let took = start.elapsed().as_millis();
    match result {
        Ok(connected) => {
            let mut seen = vec![0u8; PATTERN.len()];
            connected.buffer.read(16, &mut seen)?;
            if seen != PATTERN {
                return Err(format!("read {seen:?} through the import").into());
            }
            parent.say("imported", &took.to_string());
        }
        Err(e) => parent.say("error", &format!("{} after {took} ms: {e}", category(&e))),
    }
    parent.hear();
    Ok(())
}

/// A crowd of bad clients of one process: the first command line is `<n> <how>`; opens
/// `n` connections and on each `silent`: sends nothing; `trickle`: sends a hello one byte
/// per second (slowloris); `half`: sends half a hello and stops; `noread`: sends a valid
/// hello and never reads the reply. Reports `holding <n>` and keeps the connections until
/// the parent closes its stdin or kills it.
fn hold(parent: &Parent) -> AnyResult<()> {
    let kind: BackendKind = env(KIND_ENV)?.parse()?;
    let command = parent.hear();
    let (n, how) = command.split_once(' ').ok_or("hold needs `<n> <how>`")?;
    let n: usize = n.parse()?;
    let path = env(SOCK_ENV)?;
    let hello = format!(
        "{MAGIC} {PROTOCOL_VERSION} pid={} backend={kind}\n",
        std::process::id()
    );
    let mut conns = Vec::with_capacity(n);
    for _ in 0..n {
        let mut c = UnixStream::connect(&path)?;
        match how {
            "silent" | "trickle" => {}
            "half" => c.write_all(&hello.as_bytes()[..hello.len() / 2])?,
            "noread" => c.write_all(hello.as_bytes())?,
            other => return Err(format!("unknown way to hold {other:?}").into()),
        }
        conns.push(c);
    }
    parent.say("holding", &conns.len().to_string());
    if how == "trickle" {
        std::thread::spawn(move || {
            for byte in hello.bytes() {
                for mut c in &conns {
                    // The exporter may have given up on us: keep trickling on the others.
                    let _ = c.write_all(&[byte]);
                }
                std::thread::sleep(Duration::from_secs(1));
            }
            // Keep the connections open, silent, until the process ends.
            std::thread::sleep(LONG);
            drop(conns);
        });
        parent.hear();
    } else {
        parent.hear();
        drop(conns);
    }
    Ok(())
}

/// Imports a token it was never granted (heard from the parent) and reports the outcome.
fn thief(parent: &Parent) -> AnyResult<()> {
    let rt = child_runtime()?;
    let token: devipc::MemToken = parent.hear().parse()?;
    match rt.import(&token, DeviceId(0)) {
        Ok(_) => parent.say("stolen", ""),
        Err(e) => parent.say(
            "error",
            &format!("{} {e}", e.vendor_name().unwrap_or("not-a-vendor-error")),
        ),
    }
    Ok(())
}

/// Connects, expecting to refuse or be refused, and reports the error.
fn refused_importer(parent: &Parent) -> AnyResult<()> {
    let rt = child_runtime()?;
    match rt.connect(env(SOCK_ENV)?, DeviceId(0)) {
        Ok(_) => parent.say("connected", ""),
        Err(e) => parent.say("error", &format!("{} {e}", category(&e))),
    }
    Ok(())
}

/// Tries to share a buffer at the path and reports the outcome.
fn share_at(parent: &Parent) -> AnyResult<()> {
    let rt = child_runtime()?;
    let buffer = rt.allocate(DeviceId(0), 4096)?;
    match buffer.share(env(SOCK_ENV)?, ShareOptions::new()) {
        Ok(_server) => parent.say("shared", ""),
        Err(e) => parent.say("error", &format!("{} {e}", category(&e))),
    }
    Ok(())
}

/// A client that does not follow the protocol; the first command line says how:
/// `claim <pid>`, `garbage`, `overlong`, `silent`. Reports the exporter's reply.
fn raw_client(parent: &Parent) -> AnyResult<()> {
    let kind: BackendKind = env(KIND_ENV)?.parse()?;
    let command = parent.hear();
    let mut stream = UnixStream::connect(env(SOCK_ENV)?)?;
    stream.set_read_timeout(Some(LONG))?;
    let (how, arg) = command.split_once(' ').unwrap_or((&command, ""));
    let bytes: Vec<u8> = match how {
        "claim" => format!("{MAGIC} {PROTOCOL_VERSION} pid={arg} backend={kind}\n").into_bytes(),
        "honest" => format!(
            "{MAGIC} {PROTOCOL_VERSION} pid={} backend={kind}\n",
            std::process::id()
        )
        .into_bytes(),
        "garbage" => b"\x7fELF\x02\x01\x01\n".to_vec(),
        "overlong" => vec![b'9'; 8 * MAX_LINE],
        "silent" => Vec::new(),
        other => return Err(format!("unknown raw client {other:?}").into()),
    };
    match stream.write_all(&bytes) {
        // An exporter may refuse (a uid it does not accept) and close before reading.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        other => other?,
    }
    parent.say("sent", "");
    let mut reply = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => reply.extend_from_slice(&chunk[..n]),
            // The exporter closed with our bytes unread: reset after its reply.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => return Err(e.into()),
        }
    }
    let reply = String::from_utf8(reply)?;
    parent.say("reply", reply.trim_end());
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Parent side.

struct Setup {
    root: TestRoot,
    kind: BackendKind,
    /// The exporter's buffer length (its allocation granularity may round `SIZE` up).
    len: std::cell::Cell<usize>,
}

impl Setup {
    fn new(name: &str, kind: BackendKind) -> Setup {
        Setup {
            root: TestRoot::new(&format!("rdv-{name}-{kind}")),
            kind,
            len: std::cell::Cell::new(0),
        }
    }

    fn sock(&self) -> PathBuf {
        self.root.path().join("rdv.sock")
    }

    fn spawn(&self, role: &str, extra: &[(&str, String)]) -> Child {
        self.child(role, extra).spawn()
    }

    /// A child running as `uid` (and the same gid); fails when the system refuses.
    fn spawn_as(&self, uid: u32, role: &str, extra: &[(&str, String)]) -> std::io::Result<Child> {
        self.child(role, extra).user(uid, uid).try_spawn()
    }

    fn child(&self, role: &str, extra: &[(&str, String)]) -> devipc_testkit::ChildBuilder<'_> {
        Child::build(&child_entry(), role, &self.root)
            .env(KIND_ENV, self.kind.to_string())
            .env(SOCK_ENV, self.sock())
            .envs(extra.iter().map(|(k, v)| (k, v)))
    }

    /// An exporter that is listening; returns it and its process id.
    fn exporter(&self, extra: &[(&str, String)]) -> (Child, u32) {
        let mut exporter = self.spawn("exporter", extra);
        let ready = exporter.expect("ready");
        let (pid, len) = ready.split_once(' ').unwrap();
        self.len.set(len.parse().unwrap());
        (exporter, pid.parse().unwrap())
    }

    /// Lets `exporter` serve one importer, which imports and is checked.
    fn serve_importer(&self, exporter: &mut Child) -> Child {
        exporter.send("accept");
        let mut importer = self.spawn("importer", &[]);
        let imported = importer.expect("imported");
        let served = exporter.expect("served");
        let imported: Vec<&str> = imported.split(' ').collect();
        let served: Vec<&str> = served.split(' ').collect();
        assert_eq!(imported[0], self.len.get().to_string(), "the whole buffer");
        let importer_pid = importer.pid().to_string();
        assert_eq!(imported[1], importer_pid, "the importer's process id");
        assert_eq!(
            served,
            [importer_pid.as_str(), importer_pid.as_str(), "verified"],
            "granted the importer's own pid, checked against SO_PEERCRED"
        );
        importer
    }

    /// A raw client sends `how`; returns the exporter's report and the client's reply.
    fn misbehave(&self, exporter: &mut Child, how: &str) -> (String, String) {
        exporter.send("accept");
        let mut raw = self.spawn("raw", &[]);
        raw.send(how);
        raw.expect("sent");
        let outcome = exporter.expect("refused");
        let reply = raw.expect("reply");
        raw.wait_success();
        (outcome, reply)
    }
}

fn happy_path(kind: BackendKind) {
    let setup = Setup::new("happy", kind);
    let (mut exporter, exporter_pid) = setup.exporter(&[]);
    let mut importer = setup.serve_importer(&mut exporter);
    if kind == BackendKind::Ascend {
        // Control: the emulated ACL runtime enforces trustlists, so the import above
        // worked because the rendezvous granted the importer; a process that was not
        // granted cannot import the same token.
        exporter.send("token");
        let token = exporter.expect("token");
        let mut thief = setup.spawn("thief", &[]);
        thief.send(&token);
        let error = thief.expect("error");
        assert!(
            error.starts_with("ACL_ERROR_"),
            "the runtime itself refuses: {error}"
        );
        eprintln!("ascend: an ungranted import fails: {error}");
        thief.wait_success();
    }
    // Signals handed out through the rendezvous work both ways.
    let start = Instant::now();
    for n in [21u64, 1 << 40, 7] {
        importer.send("round");
        exporter.send(&format!("pingpong {n}"));
        assert_eq!(exporter.expect("answer"), (2 * n).to_string());
    }
    let rounds = start.elapsed();
    importer.send("exit");
    importer.wait_success();
    // A second importer of the same server, while the first is gone.
    let second = setup.serve_importer(&mut exporter);
    drop(second);
    exporter.send("drop");
    exporter.expect("dropped");
    assert!(
        !setup.sock().exists(),
        "the socket file outlived its server"
    );
    exporter.send("exit");
    exporter.wait_success();
    setup.root.assert_emulator_clean();
    eprintln!("{kind}: exporter {exporter_pid}, 3 signal round trips in {rounds:.2?}");
}

#[test]
fn buffer_and_signals_cross_processes_ascend() {
    happy_path(BackendKind::Ascend);
}

#[test]
fn buffer_and_signals_cross_processes_hip() {
    happy_path(BackendKind::Hip);
}

fn misbehaving_clients(kind: BackendKind) {
    let setup = Setup::new("bad", kind);
    let (mut exporter, exporter_pid) = setup.exporter(&[(IO_TIMEOUT_ENV, "500".into())]);

    // A client that claims another process's pid (the test runner's, the exporter's).
    for victim in [std::process::id(), exporter_pid] {
        let (outcome, reply) = setup.misbehave(&mut exporter, &format!("claim {victim}"));
        assert!(outcome.starts_with("denied "), "{outcome}");
        assert!(outcome.contains("kernel says"), "{outcome}");
        assert!(
            reply.starts_with(&format!("ERR denied the importer claims process {victim}")),
            "{reply}"
        );
    }
    let cases = [
        (
            "garbage",
            "protocol",
            "ERR protocol the hello contains byte 0x7f",
        ),
        (
            "overlong",
            "protocol",
            "ERR protocol the hello is longer than 1024 bytes",
        ),
        (
            "silent",
            "timeout",
            "ERR protocol the hello did not complete within 500ms",
        ),
    ];
    for (how, want_outcome, want_reply) in cases {
        let (outcome, reply) = setup.misbehave(&mut exporter, how);
        assert!(outcome.starts_with(want_outcome), "{how}: {outcome}");
        assert!(reply.starts_with(want_reply), "{how}: {reply}");
    }
    // The server still serves a well-behaved importer.
    let mut importer = setup.serve_importer(&mut exporter);
    importer.send("round");
    exporter.send("pingpong 5");
    assert_eq!(exporter.expect("answer"), "10");
    importer.send("exit");
    importer.wait_success();
    exporter.send("exit");
    exporter.wait_success();
    assert!(!setup.sock().exists());
    setup.root.assert_emulator_clean();
}

#[test]
fn misbehaving_clients_are_refused_and_the_server_keeps_serving_ascend() {
    misbehaving_clients(BackendKind::Ascend);
}

#[test]
fn misbehaving_clients_are_refused_and_the_server_keeps_serving_hip() {
    misbehaving_clients(BackendKind::Hip);
}

/// An exporter killed with SIGKILL leaves its socket file behind; the next exporter at
/// the path replaces it, and a file that is not a socket is never replaced.
#[test]
fn a_killed_exporters_socket_is_replaced_and_other_files_are_refused() {
    let setup = Setup::new("paths", BackendKind::Hip);
    let (exporter, _) = setup.exporter(&[]);
    exporter.kill();
    assert!(setup.sock().exists(), "SIGKILL leaves the socket file");

    let (mut exporter, _) = setup.exporter(&[]);
    // A second exporter at the live path is refused.
    let mut second = setup.spawn("share-at", &[]);
    let error = second.expect("error");
    assert!(error.starts_with("io "), "{error}");
    assert!(error.contains("another process is serving"), "{error}");
    second.wait_success();
    // The refused exporter's liveness probe is still queued at the live one, which
    // skips it and serves the next importer.
    let importer = setup.serve_importer(&mut exporter);
    drop(importer);
    exporter.send("exit");
    exporter.wait_success();
    assert!(!setup.sock().exists());

    std::fs::write(setup.sock(), b"not a socket").unwrap();
    let mut refused = setup.spawn("share-at", &[]);
    let error = refused.expect("error");
    assert!(error.starts_with("io "), "{error}");
    assert!(error.contains("regular file"), "{error}");
    refused.wait_success();
    assert_eq!(std::fs::read(setup.sock()).unwrap(), b"not a socket");
    std::fs::remove_file(setup.sock()).unwrap();
    // No emulator cleanliness check here: the killed exporter's memory is reclaimed
    // lazily by the emulator (its own tests cover that).
}

/// The socket's permissions and the leftovers of binding: mode 0600 at the final path, no
/// temporary name left in the directory.
#[test]
fn the_socket_is_private_and_alone() {
    use std::os::unix::fs::PermissionsExt;
    let setup = Setup::new("mode", BackendKind::Ascend);
    let (mut exporter, _) = setup.exporter(&[]);
    let mode = std::fs::metadata(setup.sock())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let names: Vec<String> = std::fs::read_dir(setup.root.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".sock"))
        .collect();
    assert_eq!(names, ["rdv.sock"]);
    exporter.send("exit");
    exporter.wait_success();
    assert!(!Path::new(&setup.sock()).exists());
}

/// `examples/rendezvous.rs` (built by `cargo test`) runs to completion on both emulated
/// backends: the exporter starts its importer, which only knows the socket path.
#[test]
fn the_example_runs_on_both_emulated_backends() {
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().and_then(|deps| deps.parent()).unwrap();
    let example = profile_dir.join("examples").join("rendezvous");
    assert!(
        example.exists(),
        "cargo test builds the examples: {example:?} is missing"
    );
    for backend in ["emulated-ascend", "emulated-hip"] {
        let root = TestRoot::new(&format!("rdv-example-{backend}"));
        let out = std::process::Command::new(&example)
            .envs(root.env())
            .env("DEVIPC_BACKEND", backend)
            // The example's default socket goes to the temporary directory.
            .env("TMPDIR", root.path())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "{backend}: {}\n{stdout}\n{stderr}",
            out.status
        );
        for want in [
            "granted process",
            "hello through the rendezvous",
            "answered 1000 rounds",
            "1000 round trips",
        ] {
            assert!(
                stdout.contains(want),
                "{backend}: no {want:?} in\n{stdout}\n{stderr}"
            );
        }
        let sockets: Vec<_> = std::fs::read_dir(root.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().ends_with(".sock"))
            .collect();
        assert!(
            sockets.is_empty(),
            "{backend}: socket left behind: {sockets:?}"
        );
        root.assert_emulator_clean();
    }
}

/// An importer of another uid is refused by the exporter even when the socket's mode
/// lets it connect, and an importer refuses an exporter of another uid. Needs root (to
/// start a child as `nobody`, running a copy of this binary that `nobody` can reach, so a
/// checkout under a 0700 home works); skips loudly otherwise.
#[test]
fn other_uids_are_refused_both_ways() {
    const TEST: &str = "other_uids_are_refused_both_ways";
    const NOBODY: u32 = 65534;
    if devipc_shm::os::effective_uid() != 0 {
        devipc_testkit::skip(
            TEST,
            &format!("needs root to run a child as uid {NOBODY} (run the tests as root)"),
        );
        return;
    }
    let setup = Setup::new("uids", BackendKind::Hip);
    let (mut exporter, _) = setup.exporter(&[(SOCKET_MODE_ENV, "666".into())]);

    exporter.send("accept");
    let mut stranger = match setup.spawn_as(NOBODY, "raw", &[]) {
        Ok(child) => child,
        Err(e) => {
            devipc_testkit::skip(
                TEST,
                &format!("cannot run a copy of the test binary as uid {NOBODY}: {e}"),
            );
            return;
        }
    };
    stranger.send("honest");
    stranger.expect("sent");
    let outcome = exporter.expect("refused");
    assert!(outcome.starts_with("denied "), "{outcome}");
    assert!(
        outcome.contains(&format!("uid {NOBODY} may not import")),
        "{outcome}"
    );
    let reply = stranger.expect("reply");
    assert!(
        reply.starts_with(&format!("ERR denied uid {NOBODY} may not import")),
        "{reply}"
    );
    stranger.wait_success();

    // The other way round: `nobody` with an emulator of its own refuses the root exporter
    // before sending anything.
    let own = setup.root.path().join("nobody");
    std::fs::create_dir_all(&own).unwrap();
    // 0700 whatever the umask: `nobody`'s group is shared, so group-writable is refused.
    std::fs::set_permissions(&own, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    std::os::unix::fs::chown(&own, Some(NOBODY), Some(NOBODY)).unwrap();
    let env = [
        ("DEVIPC_EMU_DIR", own.join("emu").display().to_string()),
        ("DEVIPC_RUNTIME_DIR", own.join("run").display().to_string()),
    ];
    let mut importer = setup
        .spawn_as(NOBODY, "refused-importer", &env)
        .expect("a second child as nobody (the first one started)");
    let error = importer.expect("error");
    importer.wait_success();
    assert!(error.starts_with("denied "), "{error}");
    assert!(error.contains("served by uid 0"), "{error}");
    // Its connection still waits in the exporter's queue: refused for its uid, although
    // it already left.
    exporter.send("accept");
    let outcome = exporter.expect("refused");
    assert!(
        outcome.contains(&format!("uid {NOBODY} may not import")),
        "{outcome}"
    );

    // Still serving our own uid.
    drop(setup.serve_importer(&mut exporter));
    exporter.send("exit");
    exporter.wait_success();
    setup.root.assert_emulator_clean();
}

// ---------------------------------------------------------------------------------------
// Under load (issue 13, item 3): bad clients of our own uid must not keep a legitimate
// importer from being served within its timeout.

/// Connects the crowd, then an importer with a 5 s timeout (the exporter's own per-client
/// timeout is the default 5 s too, so a server that serves one connection at a time
/// reaches the importer after the crowd's 8 silent connections, 40 s later).
fn a_crowd_of_bad_clients(kind: BackendKind) {
    let setup = Setup::new("crowd", kind);
    let (mut exporter, _) = setup.exporter(&[]);
    let mut crowd = Vec::new();
    // Eight idle connections from two processes, two slowloris connections, one client
    // that is killed in the middle of its hello, one that never reads its reply.
    for how in ["4 silent", "4 silent", "2 trickle", "1 half", "1 noread"] {
        let mut c = setup.spawn("hold", &[]);
        c.send(how);
        c.expect("holding");
        crowd.push(c);
    }
    let mut importer = setup.spawn("timed-importer", &[(CONNECT_TIMEOUT_ENV, "5000".into())]);
    exporter.send(&format!("accept-until {}", importer.pid()));
    // The exporter is busy with the crowd when the importer arrives.
    std::thread::sleep(Duration::from_millis(200));
    let killed = crowd.remove(3);
    killed.kill();
    importer.send("go");
    let (key, value) = importer.expect_one_of(&["imported", "error"]);
    assert_eq!(
        key, "imported",
        "{kind}: the importer was not served: {value}"
    );
    let took: u64 = value.parse().unwrap();
    let until = exporter.expect("until");
    let fields: Vec<&str> = until.split(' ').collect();
    let pid = importer.pid().to_string();
    assert_eq!(fields[1..], [pid.as_str(), pid.as_str()], "{until}");
    eprintln!(
        "{kind}: importer served in {took} ms past 8 idle, 2 slowloris, 1 killed and 1 \
         non-reading client ({} other outcomes first)",
        fields[0]
    );
    importer.send("exit");
    importer.wait_success();
    exporter.send("exit");
    exporter.wait_success();
    drop(crowd);
    setup.root.assert_emulator_clean();
}

#[test]
fn a_crowd_of_bad_clients_does_not_starve_an_importer_ascend() {
    a_crowd_of_bad_clients(BackendKind::Ascend);
}

#[test]
fn a_crowd_of_bad_clients_does_not_starve_an_importer_hip() {
    a_crowd_of_bad_clients(BackendKind::Hip);
}

/// A thousand idle connections: the importer is still served within 5 s, and the
/// exporter holds a bounded number of them open (file descriptors).
fn a_thousand_idle_connections(kind: BackendKind) {
    const N: usize = 1000;
    let setup = Setup::new("thousand", kind);
    let (mut exporter, _) = setup.exporter(&[]);
    exporter.send("fds");
    let fds_before: usize = exporter.expect("fds").parse().unwrap();
    let mut crowd = setup.spawn("hold", &[]);
    crowd.send(&format!("{N} silent"));
    assert_eq!(crowd.expect("holding"), N.to_string());
    let mut importer = setup.spawn("timed-importer", &[(CONNECT_TIMEOUT_ENV, "5000".into())]);
    exporter.send(&format!("accept-until {}", importer.pid()));
    std::thread::sleep(Duration::from_millis(200));
    importer.send("go");
    let (key, value) = importer.expect_one_of(&["imported", "error"]);
    assert_eq!(
        key, "imported",
        "{kind}: the importer was not served: {value}"
    );
    let until = exporter.expect("until");
    exporter.send("fds");
    let fds_after: usize = exporter.expect("fds").parse().unwrap();
    eprintln!(
        "{kind}: importer served in {value} ms past {N} idle connections \
         ({} other outcomes first); exporter fds {fds_before} -> {fds_after}",
        until.split(' ').next().unwrap()
    );
    // The exporter keeps at most 64 connections open (the oldest make room), plus a few
    // descriptors the emulator may open while granting.
    assert!(
        fds_after <= fds_before + 64 + 8,
        "{kind}: the exporter holds {fds_after} fds, {fds_before} before the crowd"
    );
    importer.send("exit");
    importer.wait_success();
    exporter.send("exit");
    exporter.wait_success();
    drop(crowd);
    setup.root.assert_emulator_clean();
}

#[test]
fn a_thousand_idle_connections_do_not_starve_an_importer_ascend() {
    a_thousand_idle_connections(BackendKind::Ascend);
}

#[test]
fn a_thousand_idle_connections_do_not_starve_an_importer_hip() {
    a_thousand_idle_connections(BackendKind::Hip);
}

// ---------------------------------------------------------------------------------------
// Long socket paths (issue 13, item 4): `sun_path` holds 107 bytes and a NUL.

/// A directory under the test root whose path is exactly `len` bytes long.
fn dir_of_len(setup: &Setup, len: usize) -> PathBuf {
    let root = setup.root.path().to_path_buf();
    let pad = len
        .checked_sub(root.as_os_str().len())
        .expect("the test root is shorter than the directory asked for");
    // Components of at most 200 bytes (NAME_MAX is 255), each with its `/`.
    let mut dir = root;
    let mut left = pad;
    while left > 0 {
        let mut part = (left - 1).min(200);
        if left - (part + 1) == 1 {
            part -= 1;
        }
        dir.push("d".repeat(part));
        left -= part + 1;
    }
    assert_eq!(dir.as_os_str().len(), len, "{dir:?}");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn long_socket_paths(kind: BackendKind) {
    const NAME: &str = "a-long-rendezvous-socket-name-for-the-model.sock";
    let setup = Setup::new("long", kind);
    // 80 + 1 + 48 bytes: the exporter's temporary name in this directory fits in
    // `sun_path`, the socket's own path does not; and 300 bytes, where neither fits.
    for dir_len in [80, 300] {
        let sock = dir_of_len(&setup, dir_len).join(NAME);
        assert!(sock.as_os_str().len() > 108);
        let at = [(SOCK_ENV, sock.display().to_string())];
        let mut exporter = setup.spawn("exporter", &at);
        exporter.expect("ready");
        exporter.send("accept");
        let mut importer = setup.spawn("importer", &at);
        importer.expect("imported");
        let served = exporter.expect("served");
        assert!(served.starts_with(&importer.pid().to_string()), "{served}");
        importer.send("exit");
        importer.wait_success();
        exporter.send("exit");
        exporter.wait_success();
        assert!(!sock.exists(), "{kind}: the socket outlived its server");
        eprintln!(
            "{kind}: served at a {}-byte socket path",
            sock.as_os_str().len()
        );
    }
    // A file name no socket address can hold, even through its directory: refused at
    // `share` and at `connect`, each with a clear error.
    let sock = dir_of_len(&setup, 80).join("n".repeat(120));
    let at = [(SOCK_ENV, sock.display().to_string())];
    let mut sharer = setup.spawn("share-at", &at);
    let error = sharer.expect("error");
    assert!(error.contains("too long for a Unix socket"), "{error}");
    sharer.wait_success();
    std::fs::write(&sock, b"").unwrap();
    let mut importer = setup.spawn("refused-importer", &at);
    let error = importer.expect("error");
    assert!(error.contains("too long for a Unix socket"), "{error}");
    importer.wait_success();
    setup.root.assert_emulator_clean();
}

#[test]
fn long_socket_paths_are_served_ascend() {
    long_socket_paths(BackendKind::Ascend);
}

#[test]
fn long_socket_paths_are_served_hip() {
    long_socket_paths(BackendKind::Hip);
}
