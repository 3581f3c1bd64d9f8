//! Mutation completeness: every rule switch the emulator has (`DEVIPC_EMU_BREAK_RULE`,
//! enumerated from `devipc_emulator::{acl,hip}::rules::ALL` by
//! `devipc_conformance::switches`) is caught by the catalogue. For each breakable switch
//! the runner runs, with that one emulator rule switched off, only the conformance rules
//! bearing on it (same id, or listed in `Rule::catches`), and at least one must fail (a
//! bearing rule that still passes is reported too: its id or `catches` entry is stale). A
//! switch no catalogue rule notices is vendor behaviour the suite never confirms on real
//! hardware; all of them are named in one failure message.
//!
//! Switches the emulator does not honour (rules of either surface that are not breakable,
//! whose ids its configuration refuses; see `devipc_conformance::switches`) cannot be
//! mutated; for them the test requires a bearing rule (which the full catalogue run shows
//! passing, its refusals naming the emulator rule) and lists them.
//!
//! Switches run in parallel (`DEVIPC_SWEEP_JOBS`, default 3: most rules wait on peers);
//! each runner has its own state directories. The switch count and wall time go to
//! stderr even when the test passes.

use std::io::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use crate::support::run_json;
use devipc_conformance::switches::{self, Switch};
use serial_test::serial;

/// What breaking one switch did.
enum Outcome {
    /// A bearing rule failed.
    Caught,
    /// No bearing rule failed: each rule's result.
    Missed(String),
    /// Caught, but these bearing rules passed anyway (a stale mapping).
    Idle(String),
}

fn sweep_one(switch: &Switch, rules: &[&str]) -> Outcome {
    let mut args = vec!["--backend", switch.target.name(), "--timeout", "60"];
    for id in rules {
        args.extend(["--rule", id]);
    }
    let (report, out) = run_json(&args, &[("DEVIPC_EMU_BREAK_RULE", switch.id)]);
    // A backend that did not even start fails every rule: that is no catch.
    let backend = &report["backends"][0];
    if backend["probe_failure"].is_string() || backend["started"] != true {
        return Outcome::Missed(format!(
            "the backend did not start with the switch off: {}",
            backend["probe_failure"]
        ));
    }
    let results = crate::support::results(&report, switch.target.name());
    let failed: Vec<String> = results
        .iter()
        .filter(|r| r["result"] == "fail" && rules.contains(&r["rule"].as_str().unwrap_or("")))
        .map(|r| r["rule"].as_str().unwrap_or("?").to_owned())
        .collect();
    if !failed.is_empty() && out.status.code() == Some(1) {
        // Every rule bearing on the switch must notice it: a rule named after the
        // emulator rule, or declaring it in `catches`, that passes without it claims a
        // check it does not make.
        let idle: Vec<&str> = rules
            .iter()
            .copied()
            .filter(|id| !failed.iter().any(|f| f == id))
            .collect();
        return if idle.is_empty() {
            Outcome::Caught
        } else {
            Outcome::Idle(idle.join(", "))
        };
    }
    let seen: Vec<String> = results
        .iter()
        .map(|r| format!("{} {}: {}", r["rule"], r["result"], r["detail"]))
        .collect();
    Outcome::Missed(format!(
        "exit {:?}; ran {}",
        out.status.code(),
        if seen.is_empty() {
            "no rule".to_owned()
        } else {
            seen.join("; ")
        }
    ))
}

#[test]
#[serial]
fn breaking_any_emulator_rule_fails_a_conformance_rule() {
    let started = Instant::now();
    let all = switches::all();
    let jobs: usize = std::env::var("DEVIPC_SWEEP_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(3);

    let mut undeclared = Vec::new();
    let mut unbreakable = Vec::new();
    let mut work: Vec<(Switch, Vec<&'static str>)> = Vec::new();
    for w in &all {
        let rules: Vec<&'static str> = switches::bearing_on(w).iter().map(|r| r.id).collect();
        if rules.is_empty() {
            undeclared.push(w.id);
        } else if !w.breakable {
            unbreakable.push(w.id);
        } else {
            work.push((*w, rules));
        }
    }

    let next = AtomicUsize::new(0);
    let outcomes: Mutex<Vec<(usize, Outcome)>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..jobs.min(work.len().max(1)) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some((switch, rules)) = work.get(i) else {
                        break;
                    };
                    let o = sweep_one(switch, rules);
                    outcomes.lock().unwrap().push((i, o));
                }
            });
        }
    });
    let mut outcomes = outcomes.into_inner().unwrap();
    outcomes.sort_by_key(|(i, _)| *i);

    let mut missed = Vec::new();
    let mut idle = Vec::new();
    let mut caught = 0;
    for (i, o) in &outcomes {
        match o {
            Outcome::Caught => caught += 1,
            Outcome::Idle(rules) => {
                caught += 1;
                idle.push(format!("{}: {rules}", work[*i].0.id));
            }
            Outcome::Missed(why) => missed.push(format!("{}: {why}", work[*i].0.id)),
        }
    }
    let _ = writeln!(
        std::io::stderr(),
        "mutation sweep: {} switches ({} breakable, {} not breakable); {caught} of {} broken \
         switches caught by {} rule runs; {} with no bearing rule; {:.1?} wall time with {jobs} \
         jobs\nnot breakable (covered by a bearing rule, cannot be mutated): {}",
        all.len(),
        all.iter().filter(|w| w.breakable).count(),
        unbreakable.len(),
        work.len(),
        work.iter().map(|(_, r)| r.len()).sum::<usize>(),
        undeclared.len(),
        started.elapsed(),
        unbreakable.join(", "),
    );

    let mut problems = Vec::new();
    if !undeclared.is_empty() {
        problems.push(format!(
            "{} switches have no conformance rule bearing on them:\n  {}",
            undeclared.len(),
            undeclared.join("\n  ")
        ));
    }
    if !missed.is_empty() {
        problems.push(format!(
            "{} switches broke no conformance rule:\n  {}",
            missed.len(),
            missed.join("\n  ")
        ));
    }
    if !idle.is_empty() {
        problems.push(format!(
            "{} switches were caught, but rules bearing on them passed with them off (fix the \
             rule or its `catches`):\n  {}",
            idle.len(),
            idle.join("\n  ")
        ));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
