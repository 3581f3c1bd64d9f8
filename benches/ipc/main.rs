//! devipc's performance goals (issue 7), each measured as a ratio against a baseline
//! measured in the same run, on both emulated backends (the devipc emulator linked into
//! the process, speaking the ACL and the HIP ABI; the baselines call the very same
//! emulator functions through the backend's raw table).
//!
//! | id | devipc | baseline | goal |
//! |---|---|---|---|
//! | P1 | facade export + grant, then import + close in a second process (each backend's default memory; HIP also `hip-vmm-fd`) | the raw vendor calls for the same | at most 1.05x |
//! | P2 | cached import (the token is already imported here; HIP also `hip-vmm-fd`) | cold import | at least 100x faster |
//! | P3 | `Signal` ping-pong between two processes | `BinarySemaphore` (futex) ping-pong on a shared file | at most 1.5x |
//! | P4 | `ImportedBuffer::read` of a peer's buffer | local `memcpy` of the same size | at least 0.95x the throughput |
//! | P5 | per-op cost (cold import + close; cached import) with 10,000 live imports | the same with 10 | at most 1.2x |
//! | P8 | `Stream::copy` out of an import + `Request::wait` (64 KiB, 1 MiB, 16 MiB; issue 25) | raw async copy + stream sync | at least 0.95x the throughput |
//! | P9 | 1,000 4 KiB copies as one `copy_batch` request + wait (issue 25) | 1,000 raw async copies + one sync | at least 0.9x |
//! | P10 | post one request (one 4 KiB copy) and poll it complete (issue 25) | raw copy + event record + query | at most 1.1x |
//!
//! ```sh
//! cargo bench --bench ipc             # full run (about two minutes), prints the table
//! cargo bench --bench ipc -- P3 hip   # only rows whose id or backend match every word
//! cargo bench --bench ipc -- P1 vmm   # `vmm` (or `hip-vmm-fd`): only the hip-vmm-fd rows
//! cargo test --benches                # smoke run: tiny sizes, checks it all works
//! cargo bench --bench ipc -- --help   # this usage
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
//!
//! Layout: this file runs the selected measurements and prints the table; [`stats`] holds
//! the series, ratios and table rows, [`peer`] the child processes (both sides), `p1` to
//! `p5` and `p8` to `p10` one measurement each, [`raw`] the baselines' vendor calls and
//! [`raw_stream`] the raw stream and event of the P8-P10 baselines.

mod p1;
mod p10;
mod p2;
mod p3;
mod p4;
mod p5;
mod p8;
mod p9;
mod peer;
mod raw;
mod raw_stream;
mod stats;

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use devipc::raw::{Backend, Mechanism};
use devipc::{BackendChoice, BackendKind, DeviceId, Runtime};

use peer::Peer;
use raw::{RawApi, RawVmm};
use stats::{Row, print_row, summary};

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
        let ok = devipc_child::run_role(&format!("bench child {role}"), || peer::child_role(&role));
        return if ok {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        };
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
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

const USAGE: &str = "\
devipc's performance goals (issue 7; BENCHMARKS.md), measured on both emulated backends.

usage: cargo bench --bench ipc [-- WORD...]   full run, prints the table
       cargo test --bench ipc                 smoke run: tiny sizes, checks every path
       cargo bench --bench ipc -- --help      this text

Each WORD selects rows; a row runs when every word matches its id (P1..P5, P8..P10), its backend
(ascend, hip) or its mechanism (vmm or hip-vmm-fd: the HIP virtual-memory rows of P1 and
P2; the other rows have none). Examples: `P3 hip`, `P1 vmm`, `ascend`.

environment: DEVIPC_BENCH_UNPINNED=1 runs P3 without CPU pinning;
             DEVIPC_EMU_HIP_VERSION (default 6.2) is the emulated HIP runtime (the
             hip-vmm-fd rows need 6.2 or later and are skipped with a note before).";

/// The mechanism word of the `hip-vmm-fd` rows, besides its name.
const VMM_WORD: &str = "vmm";

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
    let wanted = |id: &str, kind: BackendKind, mechanism: Option<Mechanism>| {
        filters.iter().all(|f| {
            id.eq_ignore_ascii_case(f)
                || kind.name() == f
                || mechanism.is_some_and(|m| m.to_string() == *f || f == VMM_WORD)
        })
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

/// The raw VMM calls if the `hip-vmm-fd` rows of `kind` are to run, `None` (with a note
/// saying why, when it is the runtime's lack) otherwise.
fn vmm_rows(
    kind: BackendKind,
    rt: &Runtime,
    raw: &RawApi,
    wanted: &dyn Fn(&str, BackendKind, Option<Mechanism>) -> bool,
) -> BenchResult<Option<RawVmm>> {
    let Backend::Hip(hip) = rt.backend() else {
        return Ok(None);
    };
    if !["P1", "P2"]
        .iter()
        .any(|id| wanted(id, kind, Some(Mechanism::HipVmmFd)))
    {
        return Ok(None);
    }
    if let Err(e) = hip.vmm_fd_support() {
        println!("  (hip-vmm-fd rows skipped: {e})");
        return Ok(None);
    }
    Ok(Some(RawVmm::of(raw)?))
}

fn bench_backend(
    kind: BackendKind,
    plan: Plan,
    wanted: &dyn Fn(&str, BackendKind, Option<Mechanism>) -> bool,
    rows: &mut Vec<Row>,
) -> BenchResult<()> {
    let choice = BackendChoice::Emulated(kind);
    let rt = Runtime::emulated(kind)?;
    let raw = RawApi::of(&rt)?;
    let vmm = vmm_rows(kind, &rt, &raw, wanted)?;
    let wanted_vmm = |id: &str| vmm.is_some() && wanted(id, kind, Some(Mechanism::HipVmmFd));
    let wanted = |id: &str, kind: BackendKind| wanted(id, kind, None);
    if ["P1", "P2", "P4", "P5", "P8", "P9", "P10"]
        .iter()
        .any(|id| wanted(id, kind))
        || vmm.is_some()
    {
        let mut exporter = Peer::spawn("exporter", choice)?;
        let exporter_pid: i32 = exporter.expect("pid")?.parse()?;
        exporter.send(&format!("peer {}", rt.process_id()))?;
        let mut push = |row: Row| {
            print_row(&row, plan.full);
            rows.push(row);
        };
        if wanted("P1", kind) {
            p1::run(kind, plan, &rt, &raw, &mut exporter, &mut push)?;
        }
        if let Some(vmm) = vmm.as_ref().filter(|_| wanted_vmm("P1")) {
            p1::run_vmm(plan, &rt, vmm, &mut exporter, exporter_pid, &mut push)?;
        }
        if wanted("P2", kind) {
            p2::run(kind, plan, &rt, &mut exporter, false, &mut push)?;
        }
        if wanted_vmm("P2") {
            p2::run(kind, plan, &rt, &mut exporter, true, &mut push)?;
        }
        if wanted("P4", kind) {
            p4::run(kind, plan, &rt, &raw, &mut exporter, &mut push)?;
        }
        if wanted("P5", kind) {
            p5::run(kind, plan, &rt, &mut exporter, &mut push)?;
        }
        if wanted("P8", kind) {
            p8::run(kind, plan, &rt, &raw, &mut exporter, &mut push)?;
        }
        if wanted("P9", kind) {
            p9::run(kind, plan, &rt, &raw, &mut exporter, &mut push)?;
        }
        if wanted("P10", kind) {
            p10::run(kind, plan, &rt, &raw, &mut exporter, &mut push)?;
        }
        exporter.finish()?;
    }
    if wanted("P3", kind) {
        let row = p3::run(kind, plan, &rt, choice)?;
        print_row(&row, plan.full);
        rows.push(row);
    }
    Ok(())
}
