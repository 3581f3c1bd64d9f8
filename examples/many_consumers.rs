//! One producer, many consumers: each consumer imports the same buffer through the
//! rendezvous socket, sums its own slice, writes the sum into its result slot, and raises
//! its own signal; the producer waits for every signal and checks the sums.
//!
//! ```sh
//! cargo run --example many_consumers                 # 8 consumers, on the emulator
//! cargo run --example many_consumers -- 32           # 32 consumers
//! DEVIPC_BACKEND=hip cargo run --example many_consumers
//! ```
//!
//! Every consumer imports the same token, so inside one consumer a second import would
//! come from devipc's import cache; across consumers each process makes its own vendor
//! import, and the producer's buffer stays alive until the last consumer closed it.

use std::process::{Child, Command, ExitCode};
use std::time::{Duration, Instant};

use devipc::rendezvous::{ConnectOptions, ShareOptions};
use devipc::{BackendChoice, DeviceId, Runtime};

/// Bytes of input per consumer.
const SLICE: usize = 64 << 10;
/// Result slots (one u64 per consumer) live after the inputs.
const TIMEOUT: Option<Duration> = Some(Duration::from_secs(60));

type AnyResult<T> = Result<T, Box<dyn std::error::Error>>;

fn runtime() -> devipc::Result<Runtime> {
    Runtime::from_env_or(BackendChoice::emulated_default())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["consumer", path, index, count] => {
            consumer(path, index.parse().unwrap_or(0), count.parse().unwrap_or(0))
        }
        [] => producer(8),
        [n] => match n.parse() {
            Ok(n) if (1..=256).contains(&n) => producer(n),
            _ => Err("the consumer count must be 1..=256".into()),
        },
        _ => Err("usage: many_consumers [count]".into()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("many_consumers: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The input byte at `i`.
fn input(i: usize) -> u8 {
    (i.wrapping_mul(7) ^ (i >> 8)) as u8
}

fn producer(consumers: usize) -> AnyResult<()> {
    let rt = runtime()?;
    println!(
        "producer: {} with {consumers} consumers",
        rt.info().describe()
    );
    let device = DeviceId(0);
    let results_at = consumers * SLICE;
    let buffer = rt.allocate(device, results_at + consumers * 8)?;
    let data: Vec<u8> = (0..results_at).map(input).collect();
    buffer.write(0, &data)?;
    let signals = (0..consumers)
        .map(|_| rt.create_signal(device))
        .collect::<devipc::Result<Vec<_>>>()?;

    let path =
        std::env::temp_dir().join(format!("devipc-many-consumers-{}.sock", std::process::id()));
    let mut server = buffer.share(&path, ShareOptions::new())?;
    for s in &signals {
        server.add_signal(s)?;
    }
    let start = Instant::now();
    let exe = std::env::current_exe()?;
    let mut children: Vec<Child> = (0..consumers)
        .map(|i| {
            Command::new(&exe)
                .args([
                    "consumer",
                    &path.to_string_lossy(),
                    &i.to_string(),
                    &consumers.to_string(),
                ])
                .spawn()
        })
        .collect::<std::io::Result<_>>()?;
    for _ in 0..consumers {
        server.accept()?;
    }
    for (i, s) in signals.iter().enumerate() {
        s.wait(TIMEOUT)?;
        let mut sum = [0u8; 8];
        buffer.read(results_at + i * 8, &mut sum)?;
        let expected: u64 = data[i * SLICE..(i + 1) * SLICE]
            .iter()
            .map(|&b| u64::from(b))
            .sum();
        let got = u64::from_le_bytes(sum);
        if got != expected {
            return Err(format!("consumer {i} summed {got}, expected {expected}").into());
        }
    }
    for child in &mut children {
        let status = child.wait()?;
        if !status.success() {
            return Err(format!("a consumer failed: {status}").into());
        }
    }
    println!(
        "producer: {consumers} consumers imported the buffer, summed {} KiB each and signalled in {:.2?}",
        SLICE >> 10,
        start.elapsed()
    );
    Ok(())
}

fn consumer(path: &str, index: usize, count: usize) -> AnyResult<()> {
    let rt = runtime()?;
    let connected = rt.connect_with(path, 0, ConnectOptions::new().wait_for_server(true))?;
    let mut slice = vec![0u8; SLICE];
    connected.buffer.read(index * SLICE, &mut slice)?;
    let sum: u64 = slice.iter().map(|&b| u64::from(b)).sum();
    connected
        .buffer
        .write(count * SLICE + index * 8, &sum.to_le_bytes())?;
    let signal = connected
        .signals
        .get(index)
        .ok_or("the producer sent too few signals")?;
    signal.notify()?;
    Ok(())
}
