//! Two processes share a device buffer and ping-pong a pair of signals.
//!
//! ```sh
//! cargo run --example quickstart                          # on the emulator
//! DEVIPC_BACKEND=hip cargo run --example quickstart       # on a real AMD GPU
//! ```
//!
//! The producer allocates a buffer, starts a consumer (this same program in the
//! `consumer` role) and learns its process id, grants it, and sends the tokens as text
//! over the consumer's stdin. Then, each round, the producer writes a number into the
//! buffer and raises `ping`; the consumer waits for `ping`, reads the number, writes it
//! back doubled at offset 8, and raises `pong`.

use std::io::{BufRead, BufReader, Write};
use std::process::ExitCode;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use devipc::{BackendChoice, DeviceId, ExportOptions, MemToken, Runtime, SignalToken};

const ROUNDS: u64 = 1000;
const SIZE: usize = 1 << 20;
const TIMEOUT: Option<Duration> = Some(Duration::from_secs(30));

type AnyResult<T> = Result<T, Box<dyn std::error::Error>>;

fn runtime() -> devipc::Result<Runtime> {
    Runtime::from_env_or(BackendChoice::emulated_default())
}

fn main() -> ExitCode {
    let consumer_role = std::env::args().nth(1).as_deref() == Some("consumer");
    let result = if consumer_role {
        consumer()
    } else {
        producer()
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let role = if consumer_role {
                "consumer"
            } else {
                "producer"
            };
            eprintln!("quickstart {role}: {e}");
            ExitCode::FAILURE
        }
    }
}

fn producer() -> AnyResult<()> {
    let rt = runtime()?;
    println!(
        "producer: {} (pid {})",
        rt.info().describe(),
        rt.process_id()
    );
    let device = DeviceId(0);
    let buffer = rt.allocate(device, SIZE)?;
    let ping = rt.create_signal(device)?;
    let pong = rt.create_signal(device)?;

    let mut child = Command::new(std::env::current_exe()?)
        .arg("consumer")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let mut to_child = child.stdin.take().ok_or("no stdin pipe")?;
    let mut from_child = BufReader::new(child.stdout.take().ok_or("no stdout pipe")?);

    // The consumer says who it is; we allow exactly that process.
    let mut line = String::new();
    from_child.read_line(&mut line)?;
    let peer = devipc::ProcessId(line.trim().parse()?);
    let token = buffer.export(ExportOptions::granted_only())?;
    buffer.grant(&token, &[peer])?;
    let ping_token = ping.export(ExportOptions::granted_only())?;
    ping.grant(&ping_token, &[peer])?;
    let pong_token = pong.export(ExportOptions::granted_only())?;
    pong.grant(&pong_token, &[peer])?;
    writeln!(to_child, "{token}\n{ping_token}\n{pong_token}")?;
    to_child.flush()?;

    let start = Instant::now();
    for round in 1..=ROUNDS {
        buffer.write(0, &round.to_le_bytes())?;
        ping.notify()?;
        pong.wait(TIMEOUT)?;
        let mut answer = [0u8; 8];
        buffer.read(8, &mut answer)?;
        let answer = u64::from_le_bytes(answer);
        if answer != 2 * round {
            return Err(format!(
                "round {round}: consumer answered {answer}, expected {}",
                2 * round
            )
            .into());
        }
    }
    let elapsed = start.elapsed();
    drop(to_child);
    let status = child.wait()?;
    if !status.success() {
        return Err(format!("consumer failed: {status}").into());
    }
    println!(
        "producer: {ROUNDS} round trips through shared memory and signals in {elapsed:.2?} ({:.1} us each)",
        elapsed.as_secs_f64() * 1e6 / ROUNDS as f64
    );
    Ok(())
}

fn consumer() -> AnyResult<()> {
    let rt = runtime()?;
    println!("{}", rt.process_id());
    std::io::stdout().flush()?;
    let mut lines = std::io::stdin().lock().lines();
    let mut next = || {
        lines
            .next()
            .ok_or("producer closed the pipe")
            .map(|l| l.map_err(|e| e.to_string()))
    };
    let token: MemToken = next()??.parse()?;
    let ping: SignalToken = next()??.parse()?;
    let pong: SignalToken = next()??.parse()?;

    let device = DeviceId(0);
    let buffer = rt.import(&token, device)?;
    let ping = rt.import_signal(&ping, device)?;
    let pong = rt.import_signal(&pong, device)?;
    for _ in 0..ROUNDS {
        ping.wait(TIMEOUT)?;
        let mut value = [0u8; 8];
        buffer.read(0, &mut value)?;
        let doubled = 2 * u64::from_le_bytes(value);
        buffer.write(8, &doubled.to_le_bytes())?;
        pong.notify()?;
    }
    eprintln!("consumer: answered {ROUNDS} rounds");
    Ok(())
}
