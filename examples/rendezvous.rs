//! Two processes meet at a Unix socket: the exporter shares a buffer and two signals,
//! the importer connects and gets them, already granted.
//!
//! ```sh
//! cargo run --example rendezvous                          # exporter + importer, emulator
//! DEVIPC_BACKEND=hip cargo run --example rendezvous       # on a real AMD GPU
//!
//! # or in two terminals:
//! cargo run --example rendezvous -- export /tmp/demo.sock
//! cargo run --example rendezvous -- import /tmp/demo.sock
//! ```
//!
//! Compared with `quickstart`, nothing but the socket path is passed between the
//! processes: the importer sends its process id over the socket, the exporter checks it
//! against the kernel's record of the peer (`SO_PEERCRED`), grants it and replies with
//! the tokens. Then, each round, the exporter writes a number into the buffer and raises
//! `ping`; the importer waits for `ping`, writes the number doubled at offset 8 and
//! raises `pong`. A zero ends the rounds.

use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use devipc::rendezvous::{ConnectOptions, ShareOptions};
use devipc::{BackendChoice, DeviceId, Runtime};

const ROUNDS: u64 = 1000;
const SIZE: usize = 1 << 20;
const GREETING: &[u8] = b"hello through the rendezvous";
const TIMEOUT: Duration = Duration::from_secs(30);

type AnyResult<T> = Result<T, Box<dyn std::error::Error>>;

fn runtime() -> devipc::Result<Runtime> {
    Runtime::from_env_or(BackendChoice::emulated_default())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (role, result) = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        [] => ("exporter", exporter(None)),
        ["export", path] => ("exporter", exporter(Some(path.into()))),
        ["import", path] => ("importer", importer(path.into())),
        _ => {
            eprintln!("usage: rendezvous [export <socket> | import <socket>]");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rendezvous {role}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Shares the buffer at `path` (default: a fresh path, with an importer started here)
/// and plays the rounds with the importer.
fn exporter(path: Option<PathBuf>) -> AnyResult<()> {
    let rt = runtime()?;
    println!(
        "exporter: {} (pid {})",
        rt.info().describe(),
        rt.process_id()
    );
    let device = DeviceId(0);
    let buffer = rt.allocate(device, SIZE)?;
    buffer.write(16, GREETING)?;
    let ping = rt.create_signal(device)?;
    let pong = rt.create_signal(device)?;

    let spawn_importer = path.is_none();
    let path = path.unwrap_or_else(|| {
        std::env::temp_dir().join(format!("devipc-rendezvous-{}.sock", std::process::id()))
    });
    let server = buffer
        .share(&path, ShareOptions::new())?
        .with_signal(&ping)?
        .with_signal(&pong)?;
    println!("exporter: serving at {}", server.path().display());

    let mut child = if spawn_importer {
        Some(
            Command::new(std::env::current_exe()?)
                .arg("import")
                .arg(server.path())
                .spawn()?,
        )
    } else {
        None
    };
    let peer = match server.accept_timeout(TIMEOUT) {
        Ok(peer) => peer,
        Err(e) => {
            if let Some(child) = child.as_mut() {
                let _ = child.kill();
                let _ = child.wait();
            }
            return Err(e.into());
        }
    };
    println!(
        "exporter: granted process {} (kernel pid {}, uid {}, {:?})",
        peer.process_id, peer.credentials.pid, peer.credentials.uid, peer.pid_check
    );
    // Nobody else needs the socket now; importers keep what they imported.
    drop(server);

    let start = Instant::now();
    for round in 1..=ROUNDS {
        buffer.write(0, &round.to_le_bytes())?;
        ping.notify()?;
        pong.wait(Some(TIMEOUT))?;
        let mut answer = [0u8; 8];
        buffer.read(8, &mut answer)?;
        let answer = u64::from_le_bytes(answer);
        if answer != 2 * round {
            return Err(format!(
                "round {round}: the importer answered {answer}, expected {}",
                2 * round
            )
            .into());
        }
    }
    let elapsed = start.elapsed();
    buffer.write(0, &0u64.to_le_bytes())?;
    ping.notify()?;
    if let Some(mut child) = child {
        let status = child.wait()?;
        if !status.success() {
            return Err(format!("the importer failed: {status}").into());
        }
    }
    println!(
        "exporter: {ROUNDS} round trips in {elapsed:.2?} ({:.1} us each)",
        elapsed.as_secs_f64() * 1e6 / ROUNDS as f64
    );
    Ok(())
}

/// Connects to the exporter at `path` (waiting for it to start) and answers its rounds.
fn importer(path: PathBuf) -> AnyResult<()> {
    let rt = runtime()?;
    let connected = rt.connect_with(
        &path,
        0,
        ConnectOptions::new().timeout(TIMEOUT).wait_for_server(true),
    )?;
    let buffer = &connected.buffer;
    let [ping, pong] = &connected.signals[..] else {
        return Err(format!(
            "the exporter sent {} signals, expected ping and pong",
            connected.signals.len()
        )
        .into());
    };
    let mut greeting = vec![0u8; GREETING.len()];
    buffer.read(16, &mut greeting)?;
    println!(
        "importer (pid {}): {} bytes from exporter pid {}: {:?}",
        rt.process_id(),
        buffer.len(),
        connected.exporter.pid,
        String::from_utf8_lossy(&greeting)
    );
    let mut rounds = 0u64;
    loop {
        ping.wait(Some(TIMEOUT))?;
        let mut value = [0u8; 8];
        buffer.read(0, &mut value)?;
        let value = u64::from_le_bytes(value);
        if value == 0 {
            break;
        }
        buffer.write(8, &(2 * value).to_le_bytes())?;
        pong.notify()?;
        rounds += 1;
    }
    println!("importer: answered {rounds} rounds");
    Ok(())
}
