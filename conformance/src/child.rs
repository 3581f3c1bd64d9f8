//! The child side: what `devipc-conformance __role <role> <target> [...]` does.
//!
//! | role | does |
//! |---|---|
//! | `probe` | probes the target and prints `@@ probe <json>` ([`crate::capabilities`]) |
//! | `rule <id>` | runs one rule's scenario and prints `@@ result <pass\|fail\|skip> <detail>` |
//! | `acl-shell`, `hip-shell` | a peer answering vendor commands ([`crate::shell::acl`], [`crate::shell::hip`]) |
//! | `facade-shell`, `counting-facade-shell` | a peer answering facade commands ([`crate::shell::facade`]) |
//!
//! Every child starts a watchdog ([`crate::runner::WATCHDOG_ENV`]) so that nothing outlives
//! a runner that died. A rule child catches a panicking scenario and reports it as a
//! failure; it prints its result only after every peer and runtime object is dropped, so
//! the runner's state check that follows sees the final state.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::Duration;

use devipc_child::{say, start_watchdog};

use crate::capabilities::{PROBE_ENV, Probe};
use crate::catalogue;
use crate::ctx::{Ctx, acl_table, facade_runtime, hip_table, roles};
use crate::rule::Stop;
use crate::runner::{REPLY_TIMEOUT_ENV, WATCHDOG_ENV};
use crate::shell::acl::AclShell;
use crate::shell::facade::FacadeShell;
use crate::shell::hip::HipShell;
use crate::shell::serve;
use crate::target::Target;

fn env_ms(name: &str, default: Duration) -> Duration {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(default, Duration::from_millis)
}

/// Runs the child role named by `args` (the arguments after `__role`); returns the
/// process exit code.
pub fn main(args: &[String]) -> i32 {
    let limit = env_ms(WATCHDOG_ENV, Duration::from_secs(1200));
    start_watchdog(
        limit,
        format!("devipc-conformance child watchdog: still running after {limit:?}, exiting"),
    );
    let role = args.first().map(String::as_str).unwrap_or("");
    let target: Result<Target, String> = args
        .get(1)
        .ok_or_else(|| "no target".to_owned())
        .and_then(|t| t.parse());
    let target = match target {
        Ok(t) => t,
        Err(e) => {
            say("fatal", &format!("bad child invocation {args:?}: {e}"));
            return 2;
        }
    };
    let served = match role {
        "probe" => {
            say("probe", &Probe::run(target).to_json().to_string());
            Ok(())
        }
        "rule" => return rule(target, args.get(2).map(String::as_str).unwrap_or("")),
        roles::ACL_SHELL => serve(|| {
            let api = acl_table(target)?;
            AclShell::new(Arc::new(api)).map_err(|e| e.to_string())
        }),
        roles::HIP_SHELL => serve(|| Ok(HipShell::new(Arc::new(hip_table(target)?)))),
        roles::FACADE_SHELL => serve(|| {
            facade_runtime(target, false).map(|rt| FacadeShell::new(rt, target.allocation()))
        }),
        roles::COUNTING_FACADE_SHELL => serve(|| {
            facade_runtime(target, true).map(|rt| FacadeShell::new(rt, target.allocation()))
        }),
        other => {
            say("fatal", &format!("unknown child role `{other}`"));
            return 2;
        }
    };
    match served {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("devipc-conformance {role}: {e}");
            1
        }
    }
}

/// The `rule` role: runs one scenario and reports the mechanisms of the tokens it shared
/// (`@@ mechanisms a,b`, when it shared any) and its verdict.
fn rule(target: Target, id: &str) -> i32 {
    let mut mechanisms = Vec::new();
    let (word, detail) = match run_rule(target, id, &mut mechanisms) {
        Ok(observed) => ("pass", observed),
        Err(Stop::Fail(why)) => ("fail", why),
        Err(Stop::Skip(why)) => ("skip", why),
    };
    if !mechanisms.is_empty() {
        say("mechanisms", &mechanisms.join(","));
    }
    say("result", &format!("{word} {detail}"));
    0
}

fn run_rule(target: Target, id: &str, mechanisms: &mut Vec<String>) -> Result<String, Stop> {
    let rule = catalogue::find(id).ok_or_else(|| Stop::fail(format!("no rule `{id}`")))?;
    let json =
        std::env::var(PROBE_ENV).map_err(|_| Stop::fail(format!("{PROBE_ENV} is not set")))?;
    let value: serde_json::Value =
        serde_json::from_str(&json).map_err(|e| Stop::fail(format!("{PROBE_ENV}: {e}")))?;
    let probe = Probe::from_json(&value).map_err(Stop::Fail)?;
    let reply = env_ms(REPLY_TIMEOUT_ENV, Duration::from_secs(60));
    let mut ctx = Ctx::new(target, probe, rule, reply);
    let outcome = catch_unwind(AssertUnwindSafe(|| (rule.scenario)(&mut ctx)));
    mechanisms.extend(ctx.mechanisms().iter().map(ToString::to_string));
    match outcome {
        Ok(verdict) => verdict,
        Err(panic) => {
            let msg = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_else(|| "a panic".into());
            Err(Stop::fail(format!("the scenario panicked: {msg}")))
        }
    }
}
