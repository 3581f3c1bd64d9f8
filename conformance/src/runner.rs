//! The runner: for each target, probe the backend, decide per rule whether its needs are
//! met, run each rule in its own child process with a deadline, and check that the run's
//! private state directories are left clean.
//!
//! Data flow: [`run`] → per target a `probe` child ([`crate::capabilities`]) → per rule either a
//! skip (needs unmet, with the reason) or a `rule` child ([`crate::child`]) that runs the
//! scenario and reports `@@ result <pass|fail|skip> <detail>` (after `@@ mechanisms
//! <list>`, the mechanisms of the tokens it shared, if any) → a [`TargetReport`] per
//! target → [`crate::report`] prints it. A child that hangs past `--timeout`, crashes or
//! exits without a result is a failure with its stderr, never a pass.
//!
//! Each target gets its own temporary root holding the emulator state directory
//! (`DEVIPC_EMU_DIR`) and devipc's runtime directory (`DEVIPC_RUNTIME_DIR`), set for every
//! child, so a run never touches the user's default directories. After each rule on an
//! emulated target the runner checks that only the emulator's `ledger` file is left; a
//! rule that leaves objects behind fails (the emulator's gc then reclaims them so the
//! next rule starts clean). The root is removed at the end.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use devipc::raw::Mechanism;
use devipc_child::ChildError;
use devipc_emulator::state::violations::VIOLATIONS;

use crate::capabilities::{PROBE_ENV, Probe};
use crate::catalogue;
use crate::process;
use crate::rule::{Need, Rule, matches};
use crate::target::Target;

/// The emulated machine the runner sets up when the user's environment does not name one
/// (`DEVIPC_EMU_DEVICES`, `DEVIPC_EMU_PEERS`).
const EMULATED_MACHINE: &[(&str, &str)] =
    &[("DEVIPC_EMU_DEVICES", "3"), ("DEVIPC_EMU_PEERS", "0-1")];

/// Environment variable telling children how long a peer may take per command.
pub const REPLY_TIMEOUT_ENV: &str = "DEVIPC_CONFORMANCE_REPLY_TIMEOUT_MS";
/// Environment variable bounding a child's life (its watchdog).
pub const WATCHDOG_ENV: &str = "DEVIPC_CONFORMANCE_WATCHDOG_MS";

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Backends to check, in order.
    pub targets: Vec<Target>,
    /// Rule id patterns (substring or glob); empty means every rule.
    pub patterns: Vec<String>,
    /// Longest a rule child may run.
    pub timeout: Duration,
}

impl Options {
    /// Whether `rule` is selected by the patterns.
    pub fn selects(&self, rule: &Rule) -> bool {
        self.patterns.is_empty() || self.patterns.iter().any(|p| matches(p, rule.id))
    }

    /// The rules selected for `target`.
    pub fn rules_for(&self, target: Target) -> Vec<&'static Rule> {
        catalogue::all()
            .into_iter()
            .filter(|r| r.runs_on(target) && self.selects(r))
            .collect()
    }
}

/// A rule's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    /// The rule holds.
    Pass,
    /// The rule does not hold, or its check could not be carried out.
    Fail,
    /// The rule cannot be checked here (needs unmet); never a pass.
    Skip,
}

impl Status {
    /// `pass`, `fail` or `skip`.
    pub const fn name(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Fail => "fail",
            Status::Skip => "skip",
        }
    }
}

/// One rule on one target.
#[derive(Debug, Clone)]
pub struct RuleResult {
    /// The rule.
    pub rule: &'static Rule,
    /// Its result.
    pub status: Status,
    /// What was observed, why it failed, or why it was skipped.
    pub detail: String,
    /// How long it took (0 for a skip decided from the probe).
    pub time: Duration,
    /// The mechanisms of the memory tokens the scenario shared (`Ctx::shares`), e.g.
    /// `hip-ipc-mem`; empty when it shared none (or did not run).
    pub mechanisms: Vec<String>,
}

/// Counts of results.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Rules that passed.
    pub passed: usize,
    /// Rules that failed.
    pub failed: usize,
    /// Rules skipped.
    pub skipped: usize,
}

impl Counts {
    /// Counts of `results`.
    pub fn of(results: &[RuleResult]) -> Counts {
        let mut c = Counts::default();
        for r in results {
            match r.status {
                Status::Pass => c.passed += 1,
                Status::Fail => c.failed += 1,
                Status::Skip => c.skipped += 1,
            }
        }
        c
    }

    /// Sum of two counts.
    pub fn plus(self, other: Counts) -> Counts {
        Counts {
            passed: self.passed + other.passed,
            failed: self.failed + other.failed,
            skipped: self.skipped + other.skipped,
        }
    }
}

/// Everything about one target's run.
#[derive(Debug, Clone)]
pub struct TargetReport {
    /// The target.
    pub target: Target,
    /// What the probe found (an unusable probe when the probe child failed).
    pub probe: Probe,
    /// Set when the probe child itself failed (crashed, hung, said nonsense).
    pub probe_failure: Option<String>,
    /// Per-rule results, in catalogue order.
    pub results: Vec<RuleResult>,
    /// Files left in the run's directories at the end (after gc), if any.
    pub leftovers: Vec<String>,
}

impl TargetReport {
    /// The counts of this target.
    pub fn counts(&self) -> Counts {
        Counts::of(&self.results)
    }

    /// Whether anything failed: a rule, the probe, or the final state check.
    pub fn failed(&self) -> bool {
        self.counts().failed > 0 || self.probe_failure.is_some() || !self.leftovers.is_empty()
    }
}

/// Runs every selected rule on every target.
pub fn run(opts: &Options, mut progress: impl FnMut(Target, &RuleResult)) -> Vec<TargetReport> {
    opts.targets
        .iter()
        .map(|&t| run_target(opts, t, &mut progress))
        .collect()
}

/// The private directories of one target's run.
struct RunDirs {
    root: PathBuf,
}

impl RunDirs {
    fn new(target: Target) -> Result<RunDirs, String> {
        let root = std::env::temp_dir().join(format!(
            "devipc-conformance-{}-{}",
            std::process::id(),
            target.name()
        ));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).map_err(|e| format!("creating {}: {e}", root.display()))?;
        Ok(RunDirs { root })
    }

    fn emu(&self) -> PathBuf {
        self.root.join("emu")
    }

    fn run(&self) -> PathBuf {
        self.root.join("run")
    }

    fn env(&self) -> Vec<(String, OsString)> {
        let mut env = vec![
            ("DEVIPC_EMU_DIR".into(), self.emu().into_os_string()),
            ("DEVIPC_RUNTIME_DIR".into(), self.run().into_os_string()),
        ];
        // The emulated machine, unless the user chose one: three devices of which 0 and 1
        // can peer and 2 cannot, so rules about both connected and unconnected devices
        // run (real machines have both: PCIe islands, XGMI / HCCS groups).
        for (var, value) in EMULATED_MACHINE {
            if std::env::var_os(var).is_none() {
                env.push(((*var).into(), (*value).into()));
            }
        }
        env
    }

    /// Files left behind: anything in the emulator directory but its `ledger` (a
    /// `violations` file is reported with its records: the emulator saw a vendor rule
    /// broken where hardware would fault or corrupt), anything in the runtime directory.
    /// With `reclaim`, runs the emulator's gc, removes the violation records and the
    /// runtime files, and reports what was there.
    ///
    /// Liveness beacons are not state of the run: a process never removes its own (not
    /// even at exit), so those of exited processes are swept first, as the next process
    /// would, and those of live ones are skipped.
    fn leftovers(&self, reclaim: bool) -> Vec<String> {
        for dir in [self.emu(), self.run()] {
            if dir.exists() {
                let _ = devipc_shm::liveness::sweep(&dir);
            }
        }
        let mut found = Vec::new();
        for name in names(&self.emu()) {
            if name == VIOLATIONS {
                let records = std::fs::read_to_string(self.emu().join(VIOLATIONS))
                    .unwrap_or_default()
                    .lines()
                    .map(|l| format!("[{l}]"))
                    .collect::<Vec<_>>()
                    .join(" ");
                found.push(format!("emu/{VIOLATIONS} (recorded violations: {records})"));
                if reclaim {
                    let _ = std::fs::remove_file(self.emu().join(VIOLATIONS));
                }
            } else if name != "ledger" {
                found.push(format!("emu/{name}"));
            }
        }
        for name in names(&self.run()) {
            found.push(format!("run/{name}"));
        }
        if reclaim && !found.is_empty() {
            if self.emu().exists()
                && let Ok(state) =
                    devipc_emulator::State::open(devipc_emulator::Config::for_dir(self.emu()))
            {
                let _ = state.gc();
            }
            for name in names(&self.run()) {
                let _ = std::fs::remove_file(self.run().join(name));
            }
        }
        found
    }
}

impl Drop for RunDirs {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// The entries of `dir`, sorted, but liveness beacons.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|it| {
            it.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| !devipc_shm::liveness::is_beacon_name(n))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn run_target(
    opts: &Options,
    target: Target,
    progress: &mut impl FnMut(Target, &RuleResult),
) -> TargetReport {
    let rules = opts.rules_for(target);
    let dirs = match RunDirs::new(target) {
        Ok(d) => d,
        Err(e) => {
            let why = format!("cannot create the run's directories: {e}");
            return everything_failed(target, rules, why);
        }
    };
    let mut env = dirs.env();
    let reply = opts.timeout.mul_f64(0.75);
    env.push((
        REPLY_TIMEOUT_ENV.into(),
        reply.as_millis().to_string().into(),
    ));
    let watchdog = opts.timeout * 2 + Duration::from_secs(30);
    env.push((WATCHDOG_ENV.into(), watchdog.as_millis().to_string().into()));

    let (probe, probe_failure) = match run_probe(target, &env, opts.timeout) {
        Ok(p) => (p, None),
        Err(e) => (Probe::unusable(target, e.clone()), Some(e)),
    };
    env.push((PROBE_ENV.into(), probe.to_json().to_string().into()));

    let mut results = Vec::new();
    for rule in rules {
        let result = if let Some(why) = &probe_failure {
            RuleResult {
                rule,
                status: Status::Fail,
                detail: format!("the backend probe failed: {why}"),
                time: Duration::ZERO,
                mechanisms: Vec::new(),
            }
        } else if let Some(reason) = unmet(rule, &probe) {
            RuleResult {
                rule,
                status: Status::Skip,
                detail: reason,
                time: Duration::ZERO,
                mechanisms: Vec::new(),
            }
        } else {
            let mut r = run_rule(target, rule, &env, opts.timeout);
            let left = dirs.leftovers(true);
            if !left.is_empty() {
                if r.status == Status::Pass {
                    r.status = Status::Fail;
                    r.detail = format!(
                        "{}; but it left state behind: {}",
                        r.detail,
                        left.join(", ")
                    );
                } else {
                    r.detail = format!("{}; left state behind: {}", r.detail, left.join(", "));
                }
            }
            r
        };
        progress(target, &result);
        results.push(result);
    }
    let leftovers = dirs.leftovers(true);
    // After gc a second look shows what the emulator could not reclaim.
    let leftovers = if leftovers.is_empty() {
        leftovers
    } else {
        dirs.leftovers(false)
    };
    TargetReport {
        target,
        probe,
        probe_failure,
        results,
        leftovers,
    }
}

fn everything_failed(target: Target, rules: Vec<&'static Rule>, why: String) -> TargetReport {
    TargetReport {
        target,
        probe: Probe::unusable(target, why.clone()),
        probe_failure: Some(why.clone()),
        results: rules
            .into_iter()
            .map(|rule| RuleResult {
                rule,
                status: Status::Fail,
                detail: why.clone(),
                time: Duration::ZERO,
                mechanisms: Vec::new(),
            })
            .collect(),
        leftovers: Vec::new(),
    }
}

fn run_probe(
    target: Target,
    env: &[(String, OsString)],
    timeout: Duration,
) -> Result<Probe, String> {
    let mut child = process::spawn("probe", &["probe", target.name()], env, true)?;
    let (k, v) = child
        .next(timeout)
        .map_err(|e| child.explain(&e.describe("probe", "the probe")))?;
    if k != "probe" {
        return Err(child.explain(&format!("the probe said `{k} {v}`")));
    }
    let json: serde_json::Value =
        serde_json::from_str(&v).map_err(|e| format!("the probe's JSON: {e}"))?;
    let probe = Probe::from_json(&json)?;
    child
        .finish(timeout)
        .map_err(|how| child.explain(&format!("the probe {how}")))?;
    Ok(probe)
}

/// Why `rule` cannot run with what `probe` found, or `None` when it can.
pub fn unmet(rule: &Rule, probe: &Probe) -> Option<String> {
    if let Err(e) = &probe.library {
        return Some(format!("backend cannot start: {e}"));
    }
    if let Err(e) = &probe.started
        && !rule.library_only()
    {
        return Some(format!("needs a device: the backend cannot start: {e}"));
    }
    if probe.target.allocation() == Some(Mechanism::HipVmmFd) && !probe.vmm_fd {
        return Some(format!(
            "the {} run allocates hip-vmm-fd memory, and this runtime ({}) lacks \
             Capabilities::vmm_fd (HIP >= 6.2 with every VMM function)",
            probe.target, probe.describe
        ));
    }
    for need in rule.needs {
        match *need {
            Need::Devices(n) if probe.devices < n => {
                return Some(format!("needs {n} devices (found {})", probe.devices));
            }
            Need::PeerAccess if !probe.peer_access => {
                return Some("needs peer access between devices 0 and 1".into());
            }
            Need::EmulatorOnly(why) if !probe.target.emulated() => {
                return Some(format!("emulator only: {why}"));
            }
            Need::RealOnly(why) if probe.target.emulated() => {
                return Some(format!("real runtime only: {why}"));
            }
            // Emulated targets too: the emulator's answers follow DEVIPC_EMU_HIP_VERSION.
            Need::HipAtLeast { major, minor, why } => match probe.version {
                Some(v) if (v.major, v.minor) >= (major, minor) => {}
                Some(v) => {
                    return Some(format!("needs HIP >= {major}.{minor} (found {v}): {why}"));
                }
                None => {
                    return Some(format!(
                        "needs HIP >= {major}.{minor} (runtime version unknown): {why}"
                    ));
                }
            },
            _ => {}
        }
    }
    None
}

fn run_rule(
    target: Target,
    rule: &'static Rule,
    env: &[(String, OsString)],
    timeout: Duration,
) -> RuleResult {
    let started = Instant::now();
    let mut mechanisms = Vec::new();
    let (mut status, mut detail) = match rule_child(target, rule, env, timeout, &mut mechanisms) {
        Ok(x) => x,
        Err(e) => (Status::Fail, e),
    };
    // On an allocation variant a pass must have shared memory of the variant's mechanism
    // (`Ctx::shares` fails any other): a scenario that shared nothing did not check the
    // rule on that mechanism.
    if let Some(m) = target.allocation()
        && status == Status::Pass
        && !mechanisms.iter().any(|s| s == m.name())
    {
        status = Status::Fail;
        detail = format!(
            "{detail}; but the scenario shared no {m} token (tokens seen: {mechanisms:?}), so \
             it did not check the rule on the {target} run's mechanism"
        );
    }
    RuleResult {
        rule,
        status,
        detail,
        time: started.elapsed(),
        mechanisms,
    }
}

fn rule_child(
    target: Target,
    rule: &Rule,
    env: &[(String, OsString)],
    timeout: Duration,
    mechanisms: &mut Vec<String>,
) -> Result<(Status, String), String> {
    let mut child = process::spawn(rule.id, &["rule", target.name(), rule.id], env, true)?;
    let deadline = Instant::now() + timeout;
    let (k, v) = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let (k, v) = match child.next(left) {
            Ok(msg) => msg,
            Err(ChildError::Timeout(_)) => {
                let e = ChildError::Timeout(timeout);
                return Err(child.explain(&e.describe(rule.id, "the rule's result")));
            }
            Err(e) => return Err(child.explain(&e.describe(rule.id, "the rule's result"))),
        };
        if k != "mechanisms" {
            break (k, v);
        }
        mechanisms.extend(v.split(',').filter(|m| !m.is_empty()).map(str::to_owned));
    };
    if k != "result" {
        return Err(child.explain(&format!("the rule child said `{k} {v}`")));
    }
    let (word, detail) = v.split_once(' ').unwrap_or((&v, ""));
    let status = match word {
        "pass" => Status::Pass,
        "skip" => Status::Skip,
        _ => Status::Fail,
    };
    if let Err(how) = child.finish(Duration::from_secs(30)) {
        let what = format!("{detail}; then the rule child {how}");
        return Ok((Status::Fail, child.explain(&what)));
    }
    Ok((status, detail.to_owned()))
}
