//! devipc's performance goals (issue 7), each measured as a ratio against a baseline
//! measured in the same run, on both emulated backends (the devipc emulator linked into
//! the process, speaking the ACL and the HIP ABI; the baselines call the very same
//! emulator functions through the backend's raw table).
//!
//! | id | devipc | baseline | goal |
//! |---|---|---|---|
//! | P1 | facade export + grant, then import + close in a second process | the raw vendor calls for the same | at most 1.05x |
//! | P2 | cached import (the token is already imported here) | cold import | at least 100x faster |
//! | P3 | `Signal` ping-pong between two processes | `BinarySemaphore` (futex) ping-pong on a shared file | at most 1.5x |
//! | P4 | `ImportedBuffer::read` of a peer's buffer | local `memcpy` of the same size | at least 0.95x the throughput |
//! | P5 | per-op cost (cold import + close; cached import) with 10,000 live imports | the same with 10 | at most 1.2x |
//!
//! ```sh
//! cargo bench --bench ipc             # full run (about two minutes), prints the table
//! cargo bench --bench ipc -- P3 hip   # only rows whose id or backend match every word
//! cargo test --benches                # smoke run: tiny sizes, checks it all works
//! ```
//!
//! Method: every figure is a batch of operations timed as a whole and divided by its
//! size (no per-operation clock reads); each measurement is repeated (21 times in a full
//! run, after a discarded warm-up) with the baseline and devipc batches interleaved and
//! their order alternated, so drift affects both alike. The table shows the median and
//! the min-max spread of both, and the median of the per-repetition ratios, which is what
//! is judged against the goal. Peers are real processes: this program re-executes itself
//! in a child role (`DEVIPC_BENCH_ROLE`), and tokens and raw handles travel over pipes
//! outside the timed sections. The emulator runs in a private directory that is removed
//! afterwards.

mod raw;

use std::hint::black_box;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use devipc::{
    BackendChoice, BackendKind, DeviceId, DevicePtr, ExportOptions, ImportedBuffer, MemToken,
    ProcessId, Runtime, SharedBuffer, SignalToken,
};
use devipc_shm::futex::BinarySemaphore;
use devipc_shm::private_dir::open_private_dir;
use devipc_shm::word_file::WordFile;

use raw::{RawAlloc, RawApi};

/// Errors of the benchmark harness.
pub type BenchResult<T> = Result<T, Box<dyn std::error::Error>>;

/// Names the role of a re-executed child.
const ROLE_ENV: &str = "DEVIPC_BENCH_ROLE";
/// Deadline of every signal wait.
const WAIT: Option<Duration> = Some(Duration::from_secs(30));
const DEV: DeviceId = DeviceId(0);

/// Sizes of a run.
#[derive(Debug, Clone, Copy)]
struct Plan {
    /// Figures are meant (`cargo bench`), rather than a smoke test (`cargo test`).
    full: bool,
    /// Timed repetitions (after one discarded warm-up).
    reps: usize,
    /// P1/P2: tokens per batch.
    batch: usize,
    /// P1: import + close passes over a batch.
    passes: usize,
    /// P3: round trips per repetition.
    rounds: usize,
    /// P3: repetitions (short ones, many: a burst of other load spoils few of them).
    rounds_reps: usize,
    /// P4: copy sizes.
    copy_sizes: &'static [usize],
    /// P4: bytes copied per batch.
    copy_volume: usize,
    /// P5: live imports of the large case.
    many: usize,
    /// P5: live imports of the small case.
    few: usize,
}

const FULL: Plan = Plan {
    full: true,
    reps: 21,
    batch: 64,
    passes: 4,
    rounds: 1000,
    rounds_reps: 41,
    copy_sizes: &[4 << 10, 64 << 10, 1 << 20, 16 << 20],
    copy_volume: 256 << 20,
    many: 10_000,
    few: 10,
};

const QUICK: Plan = Plan {
    full: false,
    reps: 2,
    batch: 4,
    passes: 1,
    rounds: 20,
    rounds_reps: 2,
    copy_sizes: &[4 << 10, 64 << 10],
    copy_volume: 1 << 20,
    many: 60,
    few: 10,
};

fn main() -> ExitCode {
    if let Ok(role) = std::env::var(ROLE_ENV) {
        return match child_role(&role) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                say("fail", &e.to_string());
                eprintln!("bench child {role}: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    let plan = if args.iter().any(|a| a == "--bench") {
        FULL
    } else {
        QUICK
    };
    let filters: Vec<String> = args
        .iter()
        .filter(|a| !a.starts_with('-'))
        .map(|a| a.to_ascii_lowercase())
        .collect();
    match run(plan, &filters) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench ipc: {e}");
            ExitCode::FAILURE
        }
    }
}

// ---- statistics and the table ------------------------------------------------------

/// How a row's ratio is formed and judged.
#[derive(Debug, Clone, Copy)]
enum Goal {
    /// devipc / baseline must be at most this.
    AtMost(f64),
    /// baseline / devipc (a speed-up or a throughput ratio) must be at least this.
    AtLeast(f64),
}

impl Goal {
    fn ratio(self, baseline: f64, devipc: f64) -> f64 {
        match self {
            Goal::AtMost(_) => devipc / baseline,
            Goal::AtLeast(_) => baseline / devipc,
        }
    }

    fn met(self, ratio: f64) -> bool {
        match self {
            Goal::AtMost(g) => ratio <= g,
            Goal::AtLeast(g) => ratio >= g,
        }
    }

    fn describe(self) -> String {
        match self {
            Goal::AtMost(g) => format!("<= {g}x"),
            Goal::AtLeast(g) => format!(">= {g}x"),
        }
    }
}

/// Median, min and max of a series.
fn summary(values: &[f64]) -> (f64, f64, f64) {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    (median, v[0], v[n - 1])
}

/// One line of the result table: per-repetition seconds per operation of both sides.
struct Row {
    id: &'static str,
    backend: BackendKind,
    what: String,
    baseline_name: &'static str,
    baseline: Vec<f64>,
    devipc: Vec<f64>,
    goal: Goal,
    /// Judged against the goal (false: an informational breakdown row).
    judged: bool,
}

impl Row {
    fn ratios(&self) -> Vec<f64> {
        self.baseline
            .iter()
            .zip(&self.devipc)
            .map(|(&b, &d)| self.goal.ratio(b, d))
            .collect()
    }
}

fn fmt_time(secs: f64) -> String {
    let ns = secs * 1e9;
    if ns < 1e3 {
        format!("{ns:.1} ns")
    } else if ns < 1e6 {
        format!("{:.2} us", ns / 1e3)
    } else {
        format!("{:.2} ms", ns / 1e6)
    }
}

fn fmt_series(values: &[f64]) -> String {
    let (m, lo, hi) = summary(values);
    format!("{} [{} - {}]", fmt_time(m), fmt_time(lo), fmt_time(hi))
}

fn print_row(row: &Row, full: bool) {
    let (ratio, lo, hi) = summary(&row.ratios());
    let verdict = if !full {
        "smoke"
    } else if !row.judged {
        "info"
    } else if row.goal.met(ratio) {
        "PASS"
    } else {
        "MISS"
    };
    println!(
        "| {} | {} | {} | {}: {} | {} | {:.3}x [{:.3} - {:.3}] | {} | {} |",
        row.id,
        row.backend,
        row.what,
        row.baseline_name,
        fmt_series(&row.baseline),
        fmt_series(&row.devipc),
        ratio,
        lo,
        hi,
        row.goal.describe(),
        verdict
    );
}

/// Runs `reps` + 1 repetitions of the baseline (`measure(false)`) and devipc
/// (`measure(true)`), alternating which goes first and dropping the first repetition
/// (warm-up); `measure` returns seconds per operation.
fn paired(
    reps: usize,
    mut measure: impl FnMut(bool) -> BenchResult<f64>,
) -> BenchResult<(Vec<f64>, Vec<f64>)> {
    let (mut b, mut d) = (Vec::new(), Vec::new());
    for rep in 0..=reps {
        let (x, y) = if rep % 2 == 0 {
            let x = measure(false)?;
            (x, measure(true)?)
        } else {
            let y = measure(true)?;
            (measure(false)?, y)
        };
        if rep > 0 {
            b.push(x);
            d.push(y);
        }
    }
    Ok((b, d))
}

// ---- child processes --------------------------------------------------------------

/// A child role of this program, spoken to over its stdin/stdout.
struct Peer {
    proc: Child,
    out: BufReader<ChildStdout>,
    inp: ChildStdin,
}

impl Peer {
    fn spawn(role: &str, choice: BackendChoice) -> BenchResult<Peer> {
        let mut proc = Command::new(std::env::current_exe()?)
            .arg(choice.to_string())
            .env(ROLE_ENV, role)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let out = BufReader::new(proc.stdout.take().ok_or("no stdout")?);
        let inp = proc.stdin.take().ok_or("no stdin")?;
        Ok(Peer { proc, out, inp })
    }

    fn line(&mut self) -> BenchResult<String> {
        let mut line = String::new();
        if self.out.read_line(&mut line)? == 0 {
            return Err("the child exited early".into());
        }
        Ok(line.trim_end().to_owned())
    }

    /// The value of the next line, which must be `key value`.
    fn expect(&mut self, key: &str) -> BenchResult<String> {
        let line = self.line()?;
        let (k, v) = line.split_once(' ').unwrap_or((&line, ""));
        if k == "fail" {
            return Err(format!("child failed: {v}").into());
        }
        if k != key {
            return Err(format!("expected `{key}` from the child, got `{line}`").into());
        }
        Ok(v.to_owned())
    }

    fn send(&mut self, line: &str) -> BenchResult<()> {
        writeln!(self.inp, "{line}")?;
        self.inp.flush()?;
        Ok(())
    }

    /// Sends an export command; returns the exporter's seconds per export and the
    /// exported items.
    fn batch(&mut self, command: &str) -> BenchResult<(f64, Vec<String>)> {
        self.send(command)?;
        let ns: f64 = self.expect("ns")?.parse()?;
        let mut items = Vec::new();
        loop {
            let line = self.line()?;
            if line == "end" {
                break;
            }
            items.push(
                line.strip_prefix("item ")
                    .ok_or_else(|| format!("unexpected `{line}`"))?
                    .to_owned(),
            );
        }
        Ok((ns / 1e9 / items.len().max(1) as f64, items))
    }

    fn finish(mut self) -> BenchResult<()> {
        self.send("quit")?;
        let status = self.proc.wait()?;
        if !status.success() {
            return Err(format!("a bench child exited with {status}").into());
        }
        Ok(())
    }
}

fn say(key: &str, value: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{key} {value}");
    let _ = out.flush();
}

fn child_role(role: &str) -> BenchResult<()> {
    let choice: BackendChoice = std::env::args().nth(1).ok_or("no backend")?.parse()?;
    match role {
        "exporter" => exporter(choice),
        "ponger-devipc" => ponger_devipc(choice),
        "ponger-futex" => ponger_futex(),
        other => Err(format!("unknown role {other}").into()),
    }
}

/// The exporting peer: answers `devipc N SIZE FILL`, `raw N SIZE`, `external N SIZE`
/// with the timed exports, `free` by releasing everything, `quit` by exiting.
fn exporter(choice: BackendChoice) -> BenchResult<()> {
    let rt = Runtime::from_choice(choice)?;
    let raw = RawApi::of(&rt)?;
    say("pid", &rt.process_id().to_string());
    let mut lines = std::io::stdin().lock().lines();
    let peer = ProcessId(
        lines
            .next()
            .ok_or("no peer")??
            .strip_prefix("peer ")
            .ok_or("expected peer")?
            .parse()?,
    );
    let mut buffers: Vec<SharedBuffer> = Vec::new();
    let mut raw_allocs: Vec<RawAlloc> = Vec::new();
    let mut mallocs: Vec<u64> = Vec::new();
    for line in lines {
        let line = line?;
        let words: Vec<&str> = line.split_whitespace().collect();
        let num = |i: usize| -> BenchResult<usize> {
            Ok(words.get(i).ok_or("missing argument")?.parse()?)
        };
        let items: Vec<String>;
        let t: Duration;
        match words.first().copied() {
            Some("devipc") => {
                let (n, size, fill) = (num(1)?, num(2)?, num(3)? != 0);
                let first = buffers.len();
                for _ in 0..n {
                    let b = rt.allocate(DEV, size)?;
                    if fill {
                        b.write(0, &pattern(b.len()))?;
                    }
                    buffers.push(b);
                }
                let start = Instant::now();
                let mut tokens = Vec::with_capacity(n);
                for b in &buffers[first..] {
                    let token = b.export(ExportOptions::trustlist())?;
                    b.grant(&token, &[peer])?;
                    tokens.push(token);
                }
                t = start.elapsed();
                items = tokens.iter().map(ToString::to_string).collect();
            }
            Some("raw") => {
                let (n, size) = (num(1)?, num(2)?);
                let first = raw_allocs.len();
                for _ in 0..n {
                    raw_allocs.push(raw.alloc(size)?);
                }
                let pid = peer.0 as i32;
                let start = Instant::now();
                let mut handles = Vec::with_capacity(n);
                for a in &raw_allocs[first..] {
                    handles.push(raw.export(a, pid)?);
                }
                t = start.elapsed();
                items = handles;
            }
            Some("external") => {
                let (n, size) = (num(1)?, num(2)?);
                let first = mallocs.len();
                for _ in 0..n {
                    mallocs.push(raw.malloc(size)?);
                }
                let start = Instant::now();
                let mut tokens = Vec::with_capacity(n);
                for &p in &mallocs[first..] {
                    let token =
                        rt.export_external(DEV, DevicePtr(p), size, ExportOptions::trustlist())?;
                    rt.grant(&token, &[peer])?;
                    tokens.push(token);
                }
                t = start.elapsed();
                items = tokens.iter().map(ToString::to_string).collect();
            }
            Some("free") => {
                buffers.clear();
                for a in raw_allocs.drain(..) {
                    raw.free(a)?;
                }
                say("ok", "");
                continue;
            }
            Some("quit") => break,
            _ => return Err(format!("unknown command `{line}`").into()),
        }
        let mut out = std::io::stdout().lock();
        writeln!(out, "ns {}", t.as_nanos())?;
        for item in items {
            writeln!(out, "item {item}")?;
        }
        writeln!(out, "end")?;
        out.flush()?;
    }
    drop(buffers);
    for a in raw_allocs {
        raw.free(a)?;
    }
    // Framework memory exported by key: the runtime closes the keys when it goes away,
    // then the blocks can be freed.
    drop(rt);
    for p in mallocs {
        let _ = raw.free_malloc(p);
    }
    Ok(())
}

/// Waits for `ping`, raises `pong`, `rounds` times (devipc signals).
fn ponger_devipc(choice: BackendChoice) -> BenchResult<()> {
    let rt = Runtime::from_choice(choice)?;
    say("pid", &rt.process_id().to_string());
    let mut lines = std::io::stdin().lock().lines();
    let mut next = || -> BenchResult<String> { Ok(lines.next().ok_or("closed")??) };
    let ping: SignalToken = next()?.parse()?;
    let pong: SignalToken = next()?.parse()?;
    let rounds: usize = next()?.parse()?;
    let ping = rt.import_signal(&ping, DEV)?;
    let pong = rt.import_signal(&pong, DEV)?;
    say("ready", "");
    for _ in 0..rounds {
        ping.wait(WAIT)?;
        pong.notify()?;
    }
    next()?; // quit
    Ok(())
}

/// Waits for `ping`, raises `pong`, `rounds` times (raw futex semaphores).
fn ponger_futex() -> BenchResult<()> {
    say("pid", &std::process::id().to_string());
    let mut lines = std::io::stdin().lock().lines();
    let mut next = || -> BenchResult<String> { Ok(lines.next().ok_or("closed")??) };
    let dir = PathBuf::from(next()?);
    let name = next()?;
    let rounds: usize = next()?.parse()?;
    let words = WordFile::open(&dir, name.as_bytes())?;
    let ping = BinarySemaphore::new(words.word(0).ok_or("word 0")?);
    let pong = BinarySemaphore::new(words.word(1).ok_or("word 1")?);
    say("ready", "");
    for _ in 0..rounds {
        ping.wait_and_reset(WAIT)?;
        pong.record()?;
    }
    next()?; // quit
    Ok(())
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

// ---- the measurements --------------------------------------------------------------

fn run(plan: Plan, filters: &[String]) -> BenchResult<()> {
    // On tmpfs, like the emulator's default state directory: on a disk file system the
    // emulator's metadata renames trigger writeback, and the figures measure the disk.
    let base = Path::new("/dev/shm");
    let base = if base.is_dir() {
        base.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    let root = base.join(format!("devipc-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root)?;
    // SAFETY: nothing else runs yet: no thread has been started and no child spawned, so
    // no one reads the environment concurrently. The emulator reads it on first use.
    unsafe {
        std::env::set_var("DEVIPC_EMU_DIR", root.join("emu"));
        std::env::set_var("DEVIPC_RUNTIME_DIR", root.join("run"));
        std::env::set_var("DEVIPC_EMU_DEVICES", "2");
        // Accounting only (the P5 Ascend case holds 10,000 small blocks; P1 64 MiB).
        std::env::set_var("DEVIPC_EMU_MEM_LIMIT", "16G");
    }
    println!("{}", machine());
    if !plan.full {
        println!("smoke run (cargo test): tiny sizes, figures are not meaningful; use cargo bench");
    }
    println!(
        "\n| id | backend | measurement | baseline: median [min - max] | devipc: median [min - max] | ratio: median [min - max] | goal | result |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let wanted = |id: &str, kind: BackendKind| {
        filters
            .iter()
            .all(|f| id.eq_ignore_ascii_case(f) || kind.name() == f)
    };
    let mut rows = Vec::new();
    let result = (|| -> BenchResult<()> {
        for kind in [BackendKind::Ascend, BackendKind::Hip] {
            bench_backend(kind, plan, &wanted, &mut rows)?;
        }
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&root);
    result?;
    if plan.full {
        let judged: Vec<&Row> = rows.iter().filter(|r| r.judged).collect();
        let missed: Vec<String> = judged
            .iter()
            .filter(|r| !r.goal.met(summary(&r.ratios()).0))
            .map(|r| format!("{} {}", r.id, r.backend))
            .collect();
        println!(
            "\n{} of {} goals met{}",
            judged.len() - missed.len(),
            judged.len(),
            if missed.is_empty() {
                String::new()
            } else {
                format!("; missed: {}", missed.join(", "))
            }
        );
    } else {
        println!("\nsmoke run: {} rows measured", rows.len());
    }
    Ok(())
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap_or_default()
        .trim()
        .to_owned();
    format!("machine: {cpu}, {cores} cores, Linux {kernel}")
}

fn bench_backend(
    kind: BackendKind,
    plan: Plan,
    wanted: &dyn Fn(&str, BackendKind) -> bool,
    rows: &mut Vec<Row>,
) -> BenchResult<()> {
    let choice = BackendChoice::Emulated(kind);
    let rt = Runtime::emulated(kind)?;
    let raw = RawApi::of(&rt)?;
    if ["P1", "P2", "P4", "P5"].iter().any(|id| wanted(id, kind)) {
        let mut exporter = Peer::spawn("exporter", choice)?;
        exporter.expect("pid")?;
        exporter.send(&format!("peer {}", rt.process_id()))?;
        let mut push = |row: Row| {
            print_row(&row, plan.full);
            rows.push(row);
        };
        if wanted("P1", kind) {
            p1(kind, plan, &rt, &raw, &mut exporter, &mut push)?;
        }
        if wanted("P2", kind) {
            p2(kind, plan, &rt, &mut exporter, &mut push)?;
        }
        if wanted("P4", kind) {
            p4(kind, plan, &rt, &raw, &mut exporter, &mut push)?;
        }
        if wanted("P5", kind) {
            p5(kind, plan, &rt, &mut exporter, &mut push)?;
        }
        exporter.finish()?;
    }
    if wanted("P3", kind) {
        let row = p3(kind, plan, &rt, choice)?;
        print_row(&row, plan.full);
        rows.push(row);
    }
    Ok(())
}

fn parse_tokens(items: &[String]) -> BenchResult<Vec<MemToken>> {
    items
        .iter()
        .map(|t| t.parse().map_err(Into::into))
        .collect()
}

/// P1: export + grant in the exporter, import + close here; devipc vs raw calls.
fn p1(
    kind: BackendKind,
    plan: Plan,
    rt: &Runtime,
    raw: &RawApi,
    exporter: &mut Peer,
    push: &mut dyn FnMut(Row),
) -> BenchResult<()> {
    let size = match kind {
        BackendKind::Ascend => raw::ACL_GRANULE,
        _ => 64 << 10,
    };
    let n = plan.batch;
    let passes = plan.passes;
    let mut export = (Vec::new(), Vec::new());
    let mut import = (Vec::new(), Vec::new());
    let (base, dev) = paired(plan.reps, |devipc| {
        if !devipc {
            let (exp, items) = exporter.batch(&format!("raw {n} {size}"))?;
            let handles: Vec<_> = items
                .iter()
                .map(|h| raw.parse(h))
                .collect::<BenchResult<_>>()?;
            let start = Instant::now();
            for _ in 0..passes {
                for h in &handles {
                    raw.import_close(h)?;
                }
            }
            let imp = start.elapsed().as_secs_f64() / (n * passes) as f64;
            exporter.send("free")?;
            exporter.expect("ok")?;
            export.0.push(exp);
            import.0.push(imp);
            Ok(exp + imp)
        } else {
            let (exp, items) = exporter.batch(&format!("devipc {n} {size} 0"))?;
            let tokens = parse_tokens(&items)?;
            let start = Instant::now();
            for _ in 0..passes {
                for t in &tokens {
                    drop(rt.import(t, DEV)?);
                }
            }
            let imp = start.elapsed().as_secs_f64() / (n * passes) as f64;
            exporter.send("free")?;
            exporter.expect("ok")?;
            export.1.push(exp);
            import.1.push(imp);
            Ok(exp + imp)
        }
    })?;
    if kind == BackendKind::Hip {
        // The HIP backend holds the exporter's crash-safe lease (devipc-shm) for every
        // import; the raw calls have nothing like it. Its cost alone, on a lease of our own:
        let lease = devipc_shm::lease::held::create()?;
        let mut costs = Vec::new();
        for _ in 0..=plan.reps {
            let start = Instant::now();
            for _ in 0..n * passes {
                let held = devipc_shm::lease::held::hold(lease.name())?;
                devipc_shm::lease::held::drop_hold(&held);
            }
            costs.push(start.elapsed().as_secs_f64() / (n * passes) as f64);
        }
        lease.remove()?;
        println!(
            "  (P1 hip: one lease hold + drop alone, as every devipc import + close takes it: {})",
            fmt_series(&costs[1..])
        );
    }
    let what = match kind {
        BackendKind::Ascend => "VMM 2 MiB",
        _ => "hipMalloc 64 KiB",
    };
    push(Row {
        id: "P1",
        backend: kind,
        what: format!("export+grant+import+close, {what}"),
        baseline_name: "raw",
        baseline: base,
        devipc: dev,
        goal: Goal::AtMost(1.05),
        judged: true,
    });
    // The two halves (the first repetition was the warm-up).
    for (name, (b, d)) in [("export+grant", export), ("import+close", import)] {
        push(Row {
            id: "P1",
            backend: kind,
            what: format!("  of which {name}"),
            baseline_name: "raw",
            baseline: b[1..].to_vec(),
            devipc: d[1..].to_vec(),
            goal: Goal::AtMost(1.05),
            judged: false,
        });
    }
    Ok(())
}

/// P2: a second import of a live token vs a cold import.
fn p2(
    kind: BackendKind,
    plan: Plan,
    rt: &Runtime,
    exporter: &mut Peer,
    push: &mut dyn FnMut(Row),
) -> BenchResult<()> {
    let n = plan.batch * 2;
    let (_, items) = exporter.batch(&format!("devipc {n} 4096 0"))?;
    let tokens = parse_tokens(&items)?;
    let cached_per_token = 64;
    let mut held: Vec<ImportedBuffer> = Vec::with_capacity(n);
    let mut again: Vec<ImportedBuffer> = Vec::with_capacity(n * cached_per_token);
    let (cold, cached) = paired(plan.reps, |devipc| {
        if !devipc {
            // Cold: nothing of these tokens is imported here; the closes are not timed.
            held.clear();
            let start = Instant::now();
            for t in &tokens {
                held.push(rt.import(t, DEV)?);
            }
            Ok(start.elapsed().as_secs_f64() / n as f64)
        } else {
            // Cached: every token is held once already; the drops are not timed.
            if held.len() != n {
                held.clear();
                for t in &tokens {
                    held.push(rt.import(t, DEV)?);
                }
            }
            again.clear();
            let start = Instant::now();
            for _ in 0..cached_per_token {
                for t in &tokens {
                    again.push(rt.import(t, DEV)?);
                }
            }
            let per = start.elapsed().as_secs_f64() / (n * cached_per_token) as f64;
            if rt.live_imports() != n {
                return Err(format!("{} live imports, expected {n}", rt.live_imports()).into());
            }
            again.clear();
            Ok(per)
        }
    })?;
    drop((held, again));
    exporter.send("free")?;
    exporter.expect("ok")?;
    push(Row {
        id: "P2",
        backend: kind,
        what: "cached import vs cold import (speed-up)".into(),
        baseline_name: "cold",
        baseline: cold,
        devipc: cached,
        goal: Goal::AtLeast(100.0),
        judged: true,
    });
    Ok(())
}

/// P4: `ImportedBuffer::read` vs a local memcpy of the same size.
fn p4(
    kind: BackendKind,
    plan: Plan,
    rt: &Runtime,
    raw: &RawApi,
    exporter: &mut Peer,
    push: &mut dyn FnMut(Row),
) -> BenchResult<()> {
    let largest = *plan.copy_sizes.iter().max().ok_or("no sizes")?;
    let (_, items) = exporter.batch(&format!("devipc 1 {largest} 1"))?;
    let token = parse_tokens(&items)?.pop().ok_or("no token")?;
    let imported = rt.import(&token, DEV)?;
    let src = pattern(largest);
    let mut dst = vec![0u8; largest];
    for &size in plan.copy_sizes {
        imported.read(0, &mut dst[..size])?;
        if dst[..size] != src[..size] {
            return Err("the imported bytes differ from what the exporter wrote".into());
        }
        let iters = (plan.copy_volume / size).max(2);
        let (base, dev) = paired(plan.reps, |devipc| {
            if !devipc {
                let start = Instant::now();
                for _ in 0..iters {
                    dst[..size].copy_from_slice(black_box(&src[..size]));
                    black_box(&mut dst);
                }
                Ok(start.elapsed().as_secs_f64() / iters as f64)
            } else {
                let start = Instant::now();
                for _ in 0..iters {
                    imported.read(0, black_box(&mut dst[..size]))?;
                    black_box(&mut dst);
                }
                Ok(start.elapsed().as_secs_f64() / iters as f64)
            }
        })?;
        // Where the per-call overhead lives: the vendor copy alone, on the same mapping.
        let raw_read = paired(plan.reps, |devipc| {
            let start = Instant::now();
            for _ in 0..iters {
                if devipc {
                    raw.read(imported.ptr().0, black_box(&mut dst[..size]))?;
                } else {
                    dst[..size].copy_from_slice(black_box(&src[..size]));
                }
                black_box(&mut dst);
            }
            Ok(start.elapsed().as_secs_f64() / iters as f64)
        })?;
        let (m, _, _) = summary(&dev);
        push(Row {
            id: "P4",
            backend: kind,
            what: format!(
                "read {} through an import ({:.1} GB/s)",
                human_size(size),
                size as f64 / m / 1e9
            ),
            baseline_name: "memcpy",
            baseline: base,
            devipc: dev,
            goal: Goal::AtLeast(0.95),
            judged: true,
        });
        push(Row {
            id: "P4",
            backend: kind,
            what: format!("  control: raw vendor copy of {} alone", human_size(size)),
            baseline_name: "memcpy",
            baseline: raw_read.0,
            devipc: raw_read.1,
            goal: Goal::AtLeast(0.95),
            judged: false,
        });
    }
    drop(imported);
    exporter.send("free")?;
    exporter.expect("ok")?;
    Ok(())
}

fn human_size(bytes: usize) -> String {
    if bytes >= 1 << 20 {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{} KiB", bytes >> 10)
    }
}

/// A hash of `value` (the P5 floor's stand-in for a cache lookup's key hashing).
fn hash_of(value: &impl std::hash::Hash) -> u64 {
    use std::hash::{BuildHasher, RandomState};
    static STATE: std::sync::LazyLock<RandomState> = std::sync::LazyLock::new(RandomState::new);
    STATE.hash_one(value)
}

/// P5: per-op costs with `plan.many` live imports vs `plan.few`.
fn p5(
    kind: BackendKind,
    plan: Plan,
    rt: &Runtime,
    exporter: &mut Peer,
    push: &mut dyn FnMut(Row),
) -> BenchResult<()> {
    // Ascend VMM memory comes in 2 MiB granules (10,000 would be 20 GiB of shared
    // memory here), so the Ascend case uses framework memory exported by IPC key
    // (`export_external`, 4 KiB `aclrtMalloc` blocks); HIP exports 4 KiB allocations.
    let probes = plan.batch;
    let total = plan.many + probes;
    let command = match kind {
        BackendKind::Ascend => format!("external {total} 4096"),
        _ => format!("devipc {total} 4096 0"),
    };
    let (_, items) = exporter.batch(&command)?;
    let tokens = parse_tokens(&items)?;
    let (live, probe) = tokens.split_at(plan.many);
    let cached_ops = 4096;
    let cold_passes = 2;
    let measure = |held: usize| -> BenchResult<(f64, f64, f64, f64)> {
        let start = Instant::now();
        for _ in 0..cold_passes {
            for t in probe {
                drop(rt.import(t, DEV)?);
            }
        }
        let cold = start.elapsed().as_secs_f64() / (probes * cold_passes) as f64;
        let stride = held / 7 + 1;
        let mut again = Vec::with_capacity(cached_ops);
        let start = Instant::now();
        for i in 0..cached_ops {
            again.push(rt.import(&live[(i * stride) % held], DEV)?);
        }
        let cached = start.elapsed().as_secs_f64() / cached_ops as f64;
        again.clear();
        // Control: the same token every time, so the memory an import touches stays in
        // the CPU caches however many imports are live.
        let start = Instant::now();
        for _ in 0..cached_ops {
            again.push(rt.import(&live[0], DEV)?);
        }
        let hot = start.elapsed().as_secs_f64() / cached_ops as f64;
        drop(again);
        // Floor: only reading the same tokens in the same order (their identity, as the
        // cache key needs it), no import. At 10,000 live tokens the tokens themselves no
        // longer fit the CPU caches; an import cannot cost less than this.
        let start = Instant::now();
        let mut sink = 0u64;
        for i in 0..cached_ops {
            let t = &live[(i * stride) % held];
            sink = sink.wrapping_add(hash_of(&t.identity()));
        }
        std::hint::black_box(sink);
        let floor = start.elapsed().as_secs_f64() / cached_ops as f64;
        Ok((cold, cached, hot, floor))
    };
    type Series = (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>);
    let series = |held: usize| -> BenchResult<Series> {
        let mut out: Series = Default::default();
        for rep in 0..=plan.reps {
            let (c, h, x, f) = measure(held)?;
            if rep > 0 {
                out.0.push(c);
                out.1.push(h);
                out.2.push(x);
                out.3.push(f);
            }
        }
        Ok(out)
    };
    let mut held: Vec<ImportedBuffer> = Vec::with_capacity(plan.many);
    for t in &live[..plan.few] {
        held.push(rt.import(t, DEV)?);
    }
    let before = series(plan.few)?;
    let start = Instant::now();
    for t in &live[plan.few..] {
        held.push(rt.import(t, DEV)?);
    }
    let build = start.elapsed();
    if rt.live_imports() != plan.many {
        return Err(format!("{} live imports, expected {}", rt.live_imports(), plan.many).into());
    }
    let during = series(plan.many)?;
    held.truncate(plan.few);
    let after = series(plan.few)?;
    drop(held);
    exporter.send("free")?;
    exporter.expect("ok")?;
    let mechanism = match kind {
        BackendKind::Ascend => "IPC-key",
        _ => "IPC",
    };
    println!(
        "  (P5 {kind}: importing the {} further tokens took {:.2?}; {} live, then {} again: cold {} / cached {})",
        plan.many - plan.few,
        build,
        plan.many,
        plan.few,
        fmt_series(&after.0),
        fmt_series(&after.1),
    );
    // Interleave the "before" and "after" small cases: the ratio compares the large case
    // with both, repetition by repetition.
    let small = |a: &[f64], b: &[f64]| -> Vec<f64> {
        a.iter().zip(b).map(|(x, y)| (x + y) / 2.0).collect()
    };
    push(Row {
        id: "P5",
        backend: kind,
        what: format!(
            "cold {mechanism} import+close at {} live vs {}",
            plan.many, plan.few
        ),
        baseline_name: "few",
        baseline: small(&before.0, &after.0),
        devipc: during.0,
        goal: Goal::AtMost(1.2),
        judged: true,
    });
    push(Row {
        id: "P5",
        backend: kind,
        what: format!(
            "cached import (live tokens in turn) at {} live vs {}",
            plan.many, plan.few
        ),
        baseline_name: "few",
        baseline: small(&before.1, &after.1),
        devipc: during.1,
        goal: Goal::AtMost(1.2),
        judged: true,
    });
    push(Row {
        id: "P5",
        backend: kind,
        what: format!(
            "  control: cached import of one token at {} live vs {}",
            plan.many, plan.few
        ),
        baseline_name: "few",
        baseline: small(&before.2, &after.2),
        devipc: during.2,
        goal: Goal::AtMost(1.2),
        judged: false,
    });
    push(Row {
        id: "P5",
        backend: kind,
        what: format!(
            "  floor: reading each token's identity in turn (no import) at {} live vs {}",
            plan.many, plan.few
        ),
        baseline_name: "few",
        baseline: small(&before.3, &after.3),
        devipc: during.3,
        goal: Goal::AtMost(1.2),
        judged: false,
    });
    Ok(())
}

/// Pins this process (and so the children it spawns next) to the first CPU it may run
/// on, and returns the previous affinity; `DEVIPC_BENCH_UNPINNED=1` leaves it alone.
///
/// On a small VM a wake-up that crosses to an idle vCPU costs 50-100 us and strikes at
/// random, swamping the few microseconds a round trip takes; on one CPU every round trip
/// is two plain context switches, for the baseline and devipc alike.
fn pin_to_one_cpu() -> BenchResult<Option<libc::cpu_set_t>> {
    if std::env::var_os("DEVIPC_BENCH_UNPINNED").is_some_and(|v| v == "1") {
        return Ok(None);
    }
    // SAFETY: cpu_set_t is plain data; all zeroes is the empty set.
    let mut previous: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: a valid out-pointer of the size passed.
    let rc = unsafe {
        libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut previous)
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    let first = (0..libc::CPU_SETSIZE as usize)
        // SAFETY: `cpu` is below CPU_SETSIZE.
        .find(|&cpu| unsafe { libc::CPU_ISSET(cpu, &previous) })
        .ok_or("no CPU in the affinity mask")?;
    // SAFETY: as above.
    let mut one: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `first` is below CPU_SETSIZE.
    unsafe { libc::CPU_SET(first, &mut one) };
    set_affinity(&one)?;
    Ok(Some(previous))
}

fn set_affinity(set: &libc::cpu_set_t) -> BenchResult<()> {
    // SAFETY: a valid set of the size passed.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    Ok(())
}

/// P3: signal round trips between two processes: devipc `Signal`s vs raw futex
/// semaphores in a shared word file.
fn p3(kind: BackendKind, plan: Plan, rt: &Runtime, choice: BackendChoice) -> BenchResult<Row> {
    let total = plan.rounds * (plan.rounds_reps + 1);
    let pinned = pin_to_one_cpu()?;
    // devipc: two signals exported and granted to the ponger.
    let mut dev_peer = Peer::spawn("ponger-devipc", choice)?;
    let pid = ProcessId(dev_peer.expect("pid")?.parse()?);
    let ping = rt.create_signal(DEV)?;
    let pong = rt.create_signal(DEV)?;
    for s in [&ping, &pong] {
        let t = s.export(ExportOptions::trustlist())?;
        s.grant(&t, &[pid])?;
        dev_peer.send(&t.to_string())?;
    }
    dev_peer.send(&total.to_string())?;
    dev_peer.expect("ready")?;
    // Baseline: the same binary semaphore on a page the two processes map.
    let run_dir = std::env::var_os("DEVIPC_RUNTIME_DIR").ok_or("no runtime dir")?;
    // The runtime directory first, so that both it and ours are created 0700.
    let run_dir = open_private_dir(Path::new(&run_dir))?;
    let dir = open_private_dir(&run_dir.join("bench-futex"))?;
    let words = WordFile::create(&dir)?;
    let mut raw_peer = Peer::spawn("ponger-futex", choice)?;
    raw_peer.expect("pid")?;
    raw_peer.send(&dir.display().to_string())?;
    raw_peer.send(std::str::from_utf8(words.name())?)?;
    raw_peer.send(&total.to_string())?;
    raw_peer.expect("ready")?;
    let raw_ping = BinarySemaphore::new(words.word(0).ok_or("word 0")?);
    let raw_pong = BinarySemaphore::new(words.word(1).ok_or("word 1")?);
    let rounds = plan.rounds;
    let (base, dev) = paired(plan.rounds_reps, |devipc| {
        if !devipc {
            let start = Instant::now();
            for _ in 0..rounds {
                raw_ping.record()?;
                raw_pong.wait_and_reset(WAIT)?;
            }
            Ok(start.elapsed().as_secs_f64() / rounds as f64)
        } else {
            let start = Instant::now();
            for _ in 0..rounds {
                ping.notify()?;
                pong.wait(WAIT)?;
            }
            Ok(start.elapsed().as_secs_f64() / rounds as f64)
        }
    })?;
    dev_peer.finish()?;
    raw_peer.finish()?;
    words.unlink()?;
    if let Some(previous) = pinned {
        set_affinity(&previous)?;
    }
    Ok(Row {
        id: "P3",
        backend: kind,
        what: "signal round trip between two processes".into(),
        baseline_name: "futex",
        baseline: base,
        devipc: dev,
        goal: Goal::AtMost(1.5),
        judged: true,
    })
}
