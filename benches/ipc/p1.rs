//! P1: the facade's export + grant in the exporter, then import + close here, against
//! the raw vendor calls for the same (goal: at most 1.05x), with the two halves as
//! information rows.

use std::time::Instant;

use devipc::{BackendKind, Runtime};

use crate::peer::{Peer, parse_tokens};
use crate::raw::{self, RawApi};
use crate::stats::{Goal, Row, fmt_series, paired};
use crate::{BenchResult, DEV, Plan};

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
