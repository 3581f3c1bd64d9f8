//! P5: the per-operation cost (cold import + close; cached import) with many live
//! imports against the same with few (goal: at most 1.2x), with a hot-token control and
//! the floor of reading the tokens alone.

use std::time::Instant;

use devipc::{BackendKind, ImportedBuffer, Runtime};

use crate::peer::{Peer, parse_tokens};
use crate::stats::{Goal, Row, fmt_series};
use crate::{BenchResult, DEV, Plan};

/// A hash of `value` (the P5 floor's stand-in for a cache lookup's key hashing).
fn hash_of(value: &impl std::hash::Hash) -> u64 {
    use std::hash::{BuildHasher, RandomState};
    static STATE: std::sync::LazyLock<RandomState> = std::sync::LazyLock::new(RandomState::new);
    STATE.hash_one(value)
}

/// P5: per-op costs with `plan.many` live imports vs `plan.few`.
pub fn run(
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
