//! HIP virtual memory (`hip-vmm-fd`) through the safe API, between real processes on the
//! emulator: the fd travels over the rendezvous socket (`SCM_RIGHTS`) or is fetched with
//! `pidfd_getfd` by a plain `Runtime::import`; bytes go both ways; either side may close
//! first. A buffer allocated the default way still goes as `hip-ipc-mem`.

use std::time::Duration;

use devipc::raw::Mechanism;
use devipc::{AllocateOptions, BackendKind, DeviceId, MemToken, Runtime, ShareOptions};
use devipc_testkit::{Child, Parent, TestRoot, child_entry};

/// The socket path the exporter serves.
const SOCK_ENV: &str = "VMM_SHARE_SOCK";
/// `vmm` or `default`: how the exporter allocates.
const HOW_ENV: &str = "VMM_SHARE_HOW";
/// What the exporter writes at offset 64.
const FROM_EXPORTER: &[u8] = b"from the exporter";
/// What the importer writes back at offset 4096.
const FROM_IMPORTER: &[u8] = b"from the importer";
const SIZE: usize = 1 << 20;

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

/// Allocates (as `VMM_SHARE_HOW` says), writes [`FROM_EXPORTER`], serves one importer over
/// the socket and says the token (for a pidfd import); then answers `check` (reads what
/// the importer wrote) and `drop` (frees the buffer) until `exit`.
fn exporter(rt: &Runtime, parent: &Parent) -> Result<(), String> {
    let how = std::env::var(HOW_ENV).map_err(|e| e.to_string())?;
    let buffer = match how.as_str() {
        "vmm" => rt.allocate_with(
            DeviceId(0),
            SIZE,
            AllocateOptions::mechanism(Mechanism::HipVmmFd),
        ),
        _ => rt.allocate(DeviceId(0), SIZE),
    }
    .map_err(e2s)?;
    buffer.write(64, FROM_EXPORTER).map_err(e2s)?;
    let sock = std::env::var(SOCK_ENV).map_err(|e| e.to_string())?;
    let server = buffer.share(&sock, ShareOptions::default()).map_err(e2s)?;
    parent.say("mechanism", &server.token().mechanism().to_string());
    parent.say("token", &server.token().to_text());
    parent.say("ready", "");
    let peer = server
        .accept_timeout(Duration::from_secs(60))
        .map_err(e2s)?;
    parent.say("accepted", &peer.credentials.pid.to_string());
    // The server holds a clone of the buffer: both go on `drop`, which frees the memory
    // (deferred while an importer still maps it).
    let mut owned = Some((server, buffer));
    loop {
        match parent.hear().as_str() {
            "check" => {
                let (_, b) = owned.as_ref().ok_or("already dropped")?;
                let mut got = vec![0u8; FROM_IMPORTER.len()];
                b.read(4096, &mut got).map_err(e2s)?;
                parent.say("read", &String::from_utf8_lossy(&got));
            }
            "drop" => {
                owned = None;
                parent.say("dropped", "");
            }
            "exit" => return Ok(()),
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
    if importer_closes_first {
        importer.send("close");
        importer.expect("closed");
        exporter.send("drop");
        exporter.expect("dropped");
    } else {
        // The exporter lets go first: the importer's mapping keeps the memory.
        exporter.send("drop");
        exporter.expect("dropped");
        importer.send("read");
        assert_eq!(
            importer.expect("read"),
            String::from_utf8_lossy(FROM_EXPORTER)
        );
        importer.send("close");
        importer.expect("closed");
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
