//! Hidden self-test rules: scenarios that misbehave on purpose, to prove the runner reports
//! a hanging or crashing child, and a peer that never answers, as failures.
//!
//! They are listed and run only when `DEVIPC_CONFORMANCE_SELFTEST=1` (the runner's own
//! tests set it, together with a short `--timeout`). Each is expected to FAIL; a runner
//! that reported one of them as passed would be broken.

use std::time::Duration;

use crate::ctx::Ctx;
use crate::rule::{Applies, Expect, Level, Need, Rule, Stop, Verdict};
use crate::shell::Request;

const NEEDS: &[Need] = &[Need::LibraryOnly];

const fn hidden(
    id: &'static str,
    summary: &'static str,
    scenario: fn(&mut Ctx) -> Verdict,
) -> Rule {
    Rule {
        id,
        level: Level::Portable,
        applies: Applies::All,
        summary,
        source: "devipc-conformance self-test (must be reported as a failure)",
        expect: Expect::Behaviour,
        needs: NEEDS,
        scenario,
        hidden: true,
        catches: &[],
        memory: false,
    }
}

/// The hidden rules.
pub static RULES: &[Rule] = &[
    hidden(
        "selftest.child.hangs",
        "the rule child sleeps far past any timeout",
        hang,
    ),
    hidden("selftest.child.crashes", "the rule child aborts", crash),
    hidden(
        "selftest.peer.hangs",
        "a peer never answers its command",
        peer_hangs,
    ),
];

fn hang(_ctx: &mut Ctx) -> Verdict {
    std::thread::sleep(Duration::from_secs(3600));
    Err(Stop::fail("woke up after an hour"))
}

fn crash(_ctx: &mut Ctx) -> Verdict {
    eprintln!("selftest: aborting on purpose");
    std::process::abort()
}

fn peer_hangs(ctx: &mut Ctx) -> Verdict {
    let mut peer = ctx.facade_peer("sleeper", false)?;
    peer.0.send(Request::Sleep(3_600_000))?;
    peer.0.reply()?;
    Ok("the peer answered after an hour".into())
}
