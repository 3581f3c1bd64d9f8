//! P4: `ImportedBuffer::read` of a peer's buffer against a local `memcpy` of the same
//! size (goal: at least 0.95x the throughput), with the raw vendor copy alone as a control.

use std::hint::black_box;
use std::time::Instant;

use devipc::{BackendKind, Runtime};

use crate::peer::{Peer, parse_tokens, pattern};
use crate::raw::RawApi;
use crate::stats::{Goal, Row, paired, summary};
use crate::{BenchResult, DEV, Plan};

/// P4: `ImportedBuffer::read` vs a local memcpy of the same size.
pub fn run(
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
