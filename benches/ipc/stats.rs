//! The statistics and the result table: a row's series (seconds per operation of the
//! baseline and of devipc, one figure per repetition), the per-repetition ratios judged
//! against the row's goal, the formatting of a table row, and the paired, interleaved
//! repetitions every measurement is made of.

use devipc::BackendKind;

use crate::BenchResult;

/// How a row's ratio is formed and judged.
#[derive(Debug, Clone, Copy)]
pub enum Goal {
    /// devipc / baseline must be at most this.
    AtMost(f64),
    /// baseline / devipc (a speed-up or a throughput ratio) must be at least this.
    AtLeast(f64),
}

impl Goal {
    /// The ratio this goal judges: devipc / baseline or baseline / devipc.
    pub fn ratio(self, baseline: f64, devipc: f64) -> f64 {
        match self {
            Goal::AtMost(_) => devipc / baseline,
            Goal::AtLeast(_) => baseline / devipc,
        }
    }

    /// Whether `ratio` meets the goal.
    pub fn met(self, ratio: f64) -> bool {
        match self {
            Goal::AtMost(g) => ratio <= g,
            Goal::AtLeast(g) => ratio >= g,
        }
    }

    /// The goal as the table shows it.
    pub fn describe(self) -> String {
        match self {
            Goal::AtMost(g) => format!("<= {g}x"),
            Goal::AtLeast(g) => format!(">= {g}x"),
        }
    }
}

/// Median, min and max of a series.
pub fn summary(values: &[f64]) -> (f64, f64, f64) {
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
pub struct Row {
    pub id: &'static str,
    pub backend: BackendKind,
    pub what: String,
    pub baseline_name: &'static str,
    pub baseline: Vec<f64>,
    pub devipc: Vec<f64>,
    pub goal: Goal,
    /// Judged against the goal (false: an informational breakdown row).
    pub judged: bool,
}

impl Row {
    /// The ratio of each repetition, as the goal forms it.
    pub fn ratios(&self) -> Vec<f64> {
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

/// A series as `median [min - max]`, in seconds per operation.
pub fn fmt_series(values: &[f64]) -> String {
    let (m, lo, hi) = summary(values);
    format!("{} [{} - {}]", fmt_time(m), fmt_time(lo), fmt_time(hi))
}

/// Prints `row` as a table line; `full`: judged against its goal, else a smoke run.
pub fn print_row(row: &Row, full: bool) {
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
pub fn paired(
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
