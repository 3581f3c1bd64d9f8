//! P2: a cached import (the token is already imported here) against a cold import
//! (goal: at least 100x faster), of each backend's default memory and, on HIP, of virtual
//! memory shared as a file descriptor (`hip-vmm-fd`, whose cold import fetches the fd with
//! `pidfd_getfd`).

use std::time::Instant;

use devipc::{BackendKind, ImportedBuffer, Runtime};

use crate::peer::{Peer, parse_tokens};
use crate::stats::{Goal, Row, paired};
use crate::{BenchResult, DEV, Plan};

/// P2: a second import of a live token vs a cold import; `vmm`: of `hip-vmm-fd` memory
/// (`allocate_with(HipVmmFd)` in the exporter) rather than the default.
pub fn run(
    kind: BackendKind,
    plan: Plan,
    rt: &Runtime,
    exporter: &mut Peer,
    vmm: bool,
    push: &mut dyn FnMut(Row),
) -> BenchResult<()> {
    let n = plan.batch * 2;
    let (_, items) = exporter.batch(&format!(
        "devipc {n} 4096 0{}",
        if vmm { " vmm" } else { "" }
    ))?;
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
        what: if vmm {
            "cached import vs cold import (speed-up), hip-vmm-fd".into()
        } else {
            "cached import vs cold import (speed-up)".into()
        },
        baseline_name: "cold",
        baseline: cold,
        devipc: cached,
        goal: Goal::AtLeast(100.0),
        judged: true,
    });
    Ok(())
}
