//! P1: the facade's export + grant in the exporter, then import + close here, against
//! the raw vendor calls for the same (goal: at most 1.05x), with the two halves as
//! information rows. Each backend's default memory ([`run`]), and HIP virtual memory
//! shared as a file descriptor ([`run_vmm`], the `hip-vmm-fd` mechanism).

use std::time::Instant;

use devipc::{BackendKind, Runtime};

use crate::peer::{Peer, parse_tokens};
use crate::raw::{self, RawApi, RawVmm};
use crate::stats::{Goal, Row, fmt_series, paired};
use crate::{BenchResult, DEV, Plan};

/// Per-repetition seconds per operation: export (+ grant) in the exporter, and import +
/// close here, of the raw side (`.0`) and devipc (`.1`).
#[derive(Default)]
struct Halves {
    export: (Vec<f64>, Vec<f64>),
    import: (Vec<f64>, Vec<f64>),
}

/// The paired repetitions of P1: the exporter answers `raw_command` or `devipc_command`
/// with a timed batch of exports; `raw_import_close` turns the raw items into handles
/// (untimed) and imports + closes each once; devipc imports + drops the tokens. Returns
/// the whole row's series (baseline, devipc) and its halves.
fn measure(
    plan: Plan,
    rt: &Runtime,
    exporter: &mut Peer,
    raw_command: &str,
    devipc_command: &str,
    raw_import_close: &dyn Fn(&[String], usize) -> BenchResult<f64>,
) -> BenchResult<(Vec<f64>, Vec<f64>, Halves)> {
    let n = plan.batch;
    let passes = plan.passes;
    let mut h = Halves::default();
    let (base, dev) = paired(plan.reps, |devipc| {
        if !devipc {
            let (exp, items) = exporter.batch(raw_command)?;
            let imp = raw_import_close(&items, passes)?;
            exporter.send("free")?;
            exporter.expect("ok")?;
            h.export.0.push(exp);
            h.import.0.push(imp);
            Ok(exp + imp)
        } else {
            let (exp, items) = exporter.batch(devipc_command)?;
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
            h.export.1.push(exp);
            h.import.1.push(imp);
            Ok(exp + imp)
        }
    })?;
    Ok((base, dev, h))
}

/// The row and its two halves (as information rows; the first repetition of the halves
/// was the warm-up).
fn push_rows(
    kind: BackendKind,
    what: String,
    (base, dev, h): (Vec<f64>, Vec<f64>, Halves),
    push: &mut dyn FnMut(Row),
) {
    push(Row {
        id: "P1",
        backend: kind,
        what,
        baseline_name: "raw",
        baseline: base,
        devipc: dev,
        goal: Goal::AtMost(1.05),
        judged: true,
    });
    for (name, (b, d)) in [("export+grant", h.export), ("import+close", h.import)] {
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
}

/// P1: export + grant in the exporter, import + close here; devipc vs raw calls.
pub fn run(
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
    let raw_import_close = |items: &[String], passes: usize| -> BenchResult<f64> {
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
        Ok(start.elapsed().as_secs_f64() / (handles.len() * passes) as f64)
    };
    let measured = measure(
        plan,
        rt,
        exporter,
        &format!("raw {n} {size}"),
        &format!("devipc {n} {size} 0"),
        &raw_import_close,
    )?;
    if kind == BackendKind::Hip {
        // The HIP backend holds the exporter's crash-safe lease (devipc-shm) for every
        // import; the raw calls have nothing like it. Its cost alone, on a lease of our own:
        let lease = devipc_shm::lease::held::create()?;
        let mut costs = Vec::new();
        for _ in 0..=plan.reps {
            let start = Instant::now();
            for _ in 0..n * plan.passes {
                let held = devipc_shm::lease::held::hold(lease.name())?;
                devipc_shm::lease::held::drop_hold(&held);
            }
            costs.push(start.elapsed().as_secs_f64() / (n * plan.passes) as f64);
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
    push_rows(
        kind,
        format!("export+grant+import+close, {what}"),
        measured,
        push,
    );
    Ok(())
}

/// P1 for HIP virtual memory shared as a file descriptor (`hip-vmm-fd`): devipc's
/// `allocate_with(HipVmmFd)` memory (untimed), export + grant, then a plain
/// `Runtime::import` here (the fd fetched with `pidfd_getfd`) + drop, against
/// [`RawVmm`]: `hipMemCreate` + reserve + map + set access (untimed),
/// `hipMemExportToShareableHandle`, then `pidfd_open` + `pidfd_getfd`, import, reserve,
/// map, set access, close the fd, unmap, free, release. `exporter_pid`: for the note on
/// the checks devipc makes before it trusts the pid a token names.
pub fn run_vmm(
    plan: Plan,
    rt: &Runtime,
    vmm: &RawVmm,
    exporter: &mut Peer,
    exporter_pid: i32,
    push: &mut dyn FnMut(Row),
) -> BenchResult<()> {
    let size = vmm.rounded(1);
    let n = plan.batch;
    let raw_import_close = |items: &[String], passes: usize| -> BenchResult<f64> {
        let handles: Vec<_> = items
            .iter()
            .map(|h| RawVmm::parse(h))
            .collect::<BenchResult<_>>()?;
        let start = Instant::now();
        for _ in 0..passes {
            for h in &handles {
                vmm.import_close(h)?;
            }
        }
        Ok(start.elapsed().as_secs_f64() / (handles.len() * passes) as f64)
    };
    let measured = measure(
        plan,
        rt,
        exporter,
        &format!("raw-vmm {n} {size}"),
        &format!("devipc {n} {size} 0 vmm"),
        &raw_import_close,
    )?;
    // Before `pidfd_getfd`, a devipc import checks that the token's exporter is this
    // host's, in this pid namespace (`HostIdentity::current`: a readlink and a read in
    // /proc), and that the pidfd names the process that made the token (its start time,
    // /proc/<pid>/stat); the raw calls trust the pid. Their costs alone:
    let ops = n * plan.passes;
    let time_alone = |f: &dyn Fn() -> BenchResult<()>| -> BenchResult<Vec<f64>> {
        let mut costs = Vec::new();
        for _ in 0..=plan.reps {
            let start = Instant::now();
            for _ in 0..ops {
                f()?;
            }
            costs.push(start.elapsed().as_secs_f64() / ops as f64);
        }
        Ok(costs.split_off(1))
    };
    let host = time_alone(&|| {
        std::hint::black_box(devipc_core::HostIdentity::current());
        Ok(())
    })?;
    let start_time = time_alone(&|| {
        std::hint::black_box(devipc_shm::process::ProcessIdentity::of_pid(exporter_pid)?);
        Ok(())
    })?;
    println!(
        "  (P1 hip-vmm-fd: the checks every devipc import makes before pidfd_getfd, each alone: host + pid namespace {}; exporter start time {})",
        fmt_series(&host),
        fmt_series(&start_time)
    );
    push_rows(
        BackendKind::Hip,
        format!("export+grant+import+close, hip-vmm-fd {} MiB", size >> 20),
        measured,
        push,
    );
    Ok(())
}
