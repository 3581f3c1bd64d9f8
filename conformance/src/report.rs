//! Reports: the human table and the `--json` document.
//!
//! # Table
//!
//! Per backend a header (`== emulated-hip: hip 6.2.0 (emulated), 2 devices ==`, on an
//! allocation variant followed by `, allocating hip-vmm-fd`; or why the backend cannot
//! start), one row per rule (`rule  level  result  time  mechanism  detail`: the
//! mechanisms of the tokens the scenario shared, `-` for none; the detail's first line),
//! the full detail of every failure, and the backend's counts; then one summary line for
//! the whole run: `N passed, N failed, N skipped`.
//!
//! # JSON schema (`--json`), version `devipc-conformance/1`
//!
//! ```text
//! {
//!   "schema": "devipc-conformance/1",
//!   "backends": [
//!     {
//!       "backend": "emulated-hip",           // ascend | hip | emulated-ascend | emulated-hip
//!                                            // | hip-vmm | emulated-hip-vmm
//!       "allocation": "default",             // how buffers are allocated: default, or the
//!                                            // variant's mechanism (hip-vmm-fd)
//!       "started": true,                     // the backend started (has a device)
//!       "start_error": null,                 // why not, when started is false
//!       "library_error": null,               // set when the vendor library did not load
//!       "probe_failure": null,               // set when probing crashed or hung (a failure)
//!       "describe": "hip 6.2.0 (emulated)",
//!       "devices": 2,
//!       "version": "6.2.0",                  // or null
//!       "state_clean": true,                 // the run's private directories were left clean
//!       "leftovers": [],                     // what was left, when not clean
//!       "results": [
//!         {
//!           "rule": "hip.mem.open-in-exporter-rejected",
//!           "level": "vendor",               // vendor | portable
//!           "applies": "hip",                // ascend | hip | all
//!           "summary": "...",
//!           "source": "...",                 // vendor document and section, or DESIGN section
//!           "expect": "hipErrorInvalidContext (201)",
//!           "needs": ["HIP >= 5.6"],
//!           "catches": [],                   // emulator rule switches it also catches
//!           "memory": true,                  // a memory rule: also runs on the
//!                                            // allocation variants (emulated-hip-vmm)
//!           "allocation": "default",         // as the backend's
//!           "mechanisms": ["hip-ipc-mem"],   // mechanisms of the memory tokens the
//!                                            // scenario shared (empty: none, or not run)
//!           "result": "pass",                // pass | fail | skip
//!           "detail": "...",                 // observation, failure reason or skip reason
//!           "time_ms": 12
//!         }
//!       ],
//!       "summary": { "passed": 40, "failed": 0, "skipped": 2 }
//!     }
//!   ],
//!   "summary": { "passed": 80, "failed": 0, "skipped": 4 }  // over all backends
//! }
//! ```
//!
//! Every rule selected for a backend appears in its `results` exactly once (an
//! allocation variant is a backend of its own, listing only the memory rules), and each
//! `summary` equals the counts of the `result` fields it covers. `--list --json` prints
//! `{"schema": "devipc-conformance/list/1", "rules": [...]}` with the rule fields above
//! (without `result`, `detail`, `time_ms`).

use std::fmt::Write as _;

use serde_json::{Value, json};

use crate::rule::Rule;
use crate::runner::{Counts, RuleResult, Status, TargetReport};

/// The schema id of the run report.
pub const SCHEMA: &str = "devipc-conformance/1";
/// The schema id of the rule list.
pub const LIST_SCHEMA: &str = "devipc-conformance/list/1";

/// `N passed, N failed, N skipped`.
pub fn summary_line(c: Counts) -> String {
    format!(
        "{} passed, {} failed, {} skipped",
        c.passed, c.failed, c.skipped
    )
}

/// The counts over all backends.
pub fn total(reports: &[TargetReport]) -> Counts {
    reports
        .iter()
        .fold(Counts::default(), |acc, r| acc.plus(r.counts()))
}

/// A rule's static fields as JSON.
pub fn rule_json(rule: &Rule) -> Value {
    json!({
        "rule": rule.id,
        "level": rule.level.name(),
        "applies": rule.applies.name(),
        "summary": rule.summary,
        "source": rule.source,
        "expect": rule.expect.to_string(),
        "needs": rule.needs.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "catches": rule.catches,
        "memory": rule.memory,
    })
}

fn result_json(t: &TargetReport, r: &RuleResult) -> Value {
    let mut v = rule_json(r.rule);
    let obj = v.as_object_mut().expect("rule_json is an object");
    obj.insert("allocation".into(), t.target.allocation_name().into());
    obj.insert("mechanisms".into(), r.mechanisms.clone().into());
    obj.insert("result".into(), r.status.name().into());
    obj.insert("detail".into(), r.detail.clone().into());
    obj.insert(
        "time_ms".into(),
        u64::try_from(r.time.as_millis()).unwrap_or(u64::MAX).into(),
    );
    v
}

fn counts_json(c: Counts) -> Value {
    json!({ "passed": c.passed, "failed": c.failed, "skipped": c.skipped })
}

/// The `--json` document of a run.
pub fn json_report(reports: &[TargetReport]) -> Value {
    let backends: Vec<Value> = reports
        .iter()
        .map(|t| {
            json!({
                "backend": t.target.name(),
                "allocation": t.target.allocation_name(),
                "started": t.probe.started.is_ok(),
                "start_error": t.probe.started.as_ref().err(),
                "library_error": t.probe.library.as_ref().err(),
                "probe_failure": t.probe_failure,
                "describe": t.probe.describe,
                "devices": t.probe.devices,
                "version": t.probe.version.map(|v| v.to_string()),
                "state_clean": t.leftovers.is_empty(),
                "leftovers": t.leftovers,
                "results": t.results.iter().map(|r| result_json(t, r)).collect::<Vec<_>>(),
                "summary": counts_json(t.counts()),
            })
        })
        .collect();
    json!({
        "schema": SCHEMA,
        "backends": backends,
        "summary": counts_json(total(reports)),
    })
}

/// The `--list --json` document.
pub fn json_list(rules: &[&Rule]) -> Value {
    json!({
        "schema": LIST_SCHEMA,
        "rules": rules.iter().map(|r| rule_json(r)).collect::<Vec<_>>(),
    })
}

/// The header line of a backend's table.
pub fn header(t: &TargetReport) -> String {
    if let Some(why) = &t.probe_failure {
        return format!("== {}: PROBE FAILED: {} ==", t.target, first_line(why));
    }
    match (&t.probe.library, &t.probe.started) {
        (Err(e), _) => format!(
            "== {}: backend cannot start: {} ==",
            t.target,
            first_line(e)
        ),
        (Ok(()), Err(e)) => format!(
            "== {}: backend cannot start (no device?): {} ==",
            t.target,
            first_line(e)
        ),
        (Ok(()), Ok(())) => format!(
            "== {}: {}, {} device(s){} ==",
            t.target,
            t.probe.describe,
            t.probe.devices,
            t.target
                .allocation()
                .map_or_else(String::new, |m| format!(", allocating {m}"))
        ),
    }
}

/// The mechanisms column of a row: the list, or `-`.
fn mechanisms_cell(r: &RuleResult) -> String {
    if r.mechanisms.is_empty() {
        "-".to_owned()
    } else {
        r.mechanisms.join(",")
    }
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

fn clip(s: &str, n: usize) -> String {
    let line = first_line(s);
    if line.chars().count() <= n {
        line.to_owned()
    } else {
        let cut: String = line.chars().take(n.saturating_sub(3)).collect();
        format!("{cut}...")
    }
}

/// The table of one backend.
pub fn table(t: &TargetReport) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", header(t));
    let width = t
        .results
        .iter()
        .map(|r| r.rule.id.len())
        .max()
        .unwrap_or(4)
        .max(4);
    let mech = t
        .results
        .iter()
        .map(|r| mechanisms_cell(r).len())
        .max()
        .unwrap_or(0)
        .max("MECHANISM".len());
    let _ = writeln!(
        out,
        "{:width$}  {:8}  {:6}  {:>7}  {:mech$}  DETAIL",
        "RULE", "LEVEL", "RESULT", "TIME", "MECHANISM"
    );
    for r in &t.results {
        let _ = writeln!(
            out,
            "{:width$}  {:8}  {:6}  {:>6.2}s  {:mech$}  {}",
            r.rule.id,
            r.rule.level.name(),
            r.status.name().to_uppercase(),
            r.time.as_secs_f64(),
            mechanisms_cell(r),
            clip(&r.detail, 110)
        );
    }
    let failures: Vec<&RuleResult> = t
        .results
        .iter()
        .filter(|r| r.status == Status::Fail)
        .collect();
    if !failures.is_empty() {
        let _ = writeln!(out, "-- failures on {} --", t.target);
        for r in failures {
            let _ = writeln!(
                out,
                "FAIL {}\n  source: {}\n  {}",
                r.rule.id,
                r.rule.source,
                r.detail.replace('\n', "\n  ")
            );
        }
    }
    if !t.leftovers.is_empty() {
        let _ = writeln!(
            out,
            "!! {}: the run left state behind: {}",
            t.target,
            t.leftovers.join(", ")
        );
    }
    let c = t.counts();
    let note = if t.probe.started.is_err() || t.probe_failure.is_some() {
        " (backend did not start)"
    } else {
        ""
    };
    let _ = writeln!(out, "{}: {}{note}", t.target, summary_line(c));
    out
}

/// The `--list` table.
pub fn list_table(rules: &[&Rule]) -> String {
    let mut out = String::new();
    let width = rules.iter().map(|r| r.id.len()).max().unwrap_or(4).max(4);
    let _ = writeln!(
        out,
        "{:width$}  {:8}  {:6}  {:30}  SOURCE",
        "RULE", "LEVEL", "APPLY", "NEEDS"
    );
    for r in rules {
        let needs: Vec<String> = r.needs.iter().map(ToString::to_string).collect();
        let _ = writeln!(
            out,
            "{:width$}  {:8}  {:6}  {:30}  {}",
            r.id,
            r.level.name(),
            r.applies.name(),
            if needs.is_empty() {
                "-".to_owned()
            } else {
                needs.join(", ")
            },
            r.source
        );
    }
    let _ = writeln!(out, "{} rules", rules.len());
    out
}
