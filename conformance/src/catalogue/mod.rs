//! The rule catalogue: every rule the suite checks, as data.
//!
//! | module | rules |
//! |---|---|
//! | [`ascend`] | ACL vendor rules (VMM shareable handles, IPC keys, notify IPC, devices), api-facts C.4-C.6 |
//! | [`ascend_args`] | ACL argument checks, init counting, VMM mappings, copies, ownership (api-facts A.3-A.11) |
//! | [`hip`] | HIP vendor rules (IPC memory, IPC events, peer access, runtime queries, VMM), api-facts C.1-C.3, B |
//! | [`hip_args`] | HIP argument checks added for mutation completeness (streams) |
//! | [`portable`](mod@portable) | devipc's portable guarantees, DESIGN section 5, on both backends |
//! | [`placement`] | the portable guarantee that imports find the exporter's physical device under any visibility mask |
//! | [`selftest`] | hidden rules that prove the runner reports hangs and crashes as failures |
//!
//! Where the emulator enforces the same rule, a vendor rule reuses the emulator's id
//! (`devipc_emulator::{acl,hip}::rules`), so `DEVIPC_EMU_BREAK_RULE=<id>` breaks exactly
//! the rule of that name, and on the emulator a refusal must name it. A rule may also
//! declare other emulator switches it catches ([`Rule::catches`]); see
//! [`crate::switches`] for the mutation sweep that checks every switch is caught.

pub mod ascend;
pub mod ascend_args;
pub mod hip;
pub mod hip_args;
pub mod placement;
pub mod portable;
pub mod selftest;

use crate::rule::{Applies, Expect, Level, Need, Rule, Scenario, Stop};
use crate::shell::Failure;

/// Environment variable that makes the hidden self-test rules visible (tests only).
pub const SELFTEST_ENV: &str = "DEVIPC_CONFORMANCE_SELFTEST";

/// Every rule, hidden ones included, in report order: table by table.
fn every() -> impl Iterator<Item = &'static Rule> {
    ascend::TABLES
        .iter()
        .chain(ascend_args::TABLES)
        .chain(hip::TABLES)
        .chain(hip_args::TABLES)
        .copied()
        .chain([portable::RULES, placement::RULES, selftest::RULES])
        .flat_map(|table| table.iter())
}

/// Every rule, in report order; hidden rules only when [`SELFTEST_ENV`] is `1`.
pub fn all() -> Vec<&'static Rule> {
    let selftest = std::env::var(SELFTEST_ENV).is_ok_and(|v| v == "1");
    every().filter(|r| selftest || !r.hidden).collect()
}

/// The rule with this id (hidden ones included: a child runs what its parent chose).
pub fn find(id: &str) -> Option<&'static Rule> {
    every().find(|r| r.id == id)
}

/// Whether the emulator enforces a rule with this id (so its refusals name it).
pub fn emulator_enforces(id: &str) -> bool {
    devipc_emulator::acl::rules::info(id).is_some()
        || devipc_emulator::hip::rules::info(id).is_some()
}

/// A vendor rule.
pub(crate) const fn vendor(
    id: &'static str,
    applies: Applies,
    summary: &'static str,
    source: &'static str,
    expect: Expect,
    needs: &'static [Need],
    scenario: Scenario,
) -> Rule {
    Rule {
        id,
        level: Level::Vendor,
        applies,
        summary,
        source,
        expect,
        needs,
        scenario,
        hidden: false,
        catches: &[],
        memory: false,
    }
}

/// A portable guarantee (applies to every backend).
pub(crate) const fn portable(
    id: &'static str,
    summary: &'static str,
    source: &'static str,
    expect: Expect,
    needs: &'static [Need],
    scenario: Scenario,
) -> Rule {
    Rule {
        id,
        level: Level::Portable,
        applies: Applies::All,
        summary,
        source,
        expect,
        needs,
        scenario,
        hidden: false,
        catches: &[],
        memory: false,
    }
}

/// The byte pattern both sides of a transfer agree on.
pub fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed ^ ((i >> 8) as u8).wrapping_mul(7))
        .collect()
}

/// Fails unless `got == want`, naming the first differing byte.
pub fn same_bytes(what: &str, got: &[u8], want: &[u8]) -> Result<(), Stop> {
    if got == want {
        return Ok(());
    }
    let at = got
        .iter()
        .zip(want)
        .position(|(a, b)| a != b)
        .unwrap_or(got.len().min(want.len()));
    Err(Stop::fail(format!(
        "{what}: bytes differ at {at} (got {} bytes, want {})",
        got.len(),
        want.len()
    )))
}

/// Fails with `what` unless `cond`.
pub fn ensure(cond: bool, what: impl FnOnce() -> String) -> Result<(), Stop> {
    if cond {
        Ok(())
    } else {
        Err(Stop::Fail(what()))
    }
}

/// Adds context to a failing step.
pub trait Step<T> {
    /// On error, fails with `what: error`.
    fn step(self, what: &str) -> Result<T, Stop>;
}

impl<T, E: std::fmt::Display> Step<T> for Result<T, E> {
    fn step(self, what: &str) -> Result<T, Stop> {
        self.map_err(|e| Stop::Fail(format!("{what}: {e}")))
    }
}

/// As [`Step`], for an import that may fetch a `hip-vmm-fd` token's file descriptor from
/// its exporter with `pidfd_getfd` (a plain `Runtime::import`, here or in a facade peer).
/// The kernel allows that only with ptrace access to the exporter (same user and no Yama
/// restriction, or `PR_SET_PTRACER`); where it refuses (EPERM), the rule cannot be
/// checked on this machine: a skip with the reason, never a pass or a failure.
pub trait Import<T> {
    /// On a refused `pidfd_getfd`, skips with `what: error`; on another error, fails.
    fn imported(self, what: &str) -> Result<T, Stop>;
}

/// Whether an error message is `pidfd_getfd` refused with EPERM (devipc-hip's `Error::Io`
/// of `fetch_fd`, as its message crosses the facade shell's wire).
pub fn pidfd_refused(message: &str) -> bool {
    message.contains("pidfd_getfd")
        && (message.contains("was refused") || message.contains("Operation not permitted"))
}

fn pidfd_skip(what: &str, error: &dyn std::fmt::Display) -> Stop {
    Stop::Skip(format!(
        "{what}: the pidfd path is unavailable on this machine (the importer lacks ptrace \
         access to the exporter, e.g. kernel.yama.ptrace_scope >= 1): {error}"
    ))
}

impl<T> Import<T> for Result<T, devipc::Error> {
    fn imported(self, what: &str) -> Result<T, Stop> {
        self.map_err(|e| match &e {
            devipc::Error::Io { source, .. }
                if source.kind() == std::io::ErrorKind::PermissionDenied
                    && pidfd_refused(&e.to_string()) =>
            {
                pidfd_skip(what, &e)
            }
            _ => Stop::Fail(format!("{what}: {e}")),
        })
    }
}

impl<T> Import<T> for Result<T, Failure> {
    fn imported(self, what: &str) -> Result<T, Stop> {
        self.map_err(|f| match &f {
            Failure::Devipc { kind, message } if kind == "Io" && pidfd_refused(message) => {
                pidfd_skip(what, &f)
            }
            _ => Stop::Fail(format!("{what}: {f}")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn ids_are_unique_scoped_and_documented() {
        let mut seen = HashSet::new();
        for r in every() {
            assert!(seen.insert(r.id), "duplicate id {}", r.id);
            let scope = r.id.split('.').next().unwrap();
            match r.level {
                Level::Vendor => assert!(
                    (scope == "ascend" && r.applies == Applies::Ascend)
                        || (scope == "hip" && r.applies == Applies::Hip),
                    "{}",
                    r.id
                ),
                Level::Portable => assert!(
                    (scope == "portable" || (r.hidden && scope == "selftest"))
                        && r.applies == Applies::All,
                    "{}",
                    r.id
                ),
            }
            assert!(r.id.split('.').count() >= 3, "{}", r.id);
            assert!(
                r.id.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-.".contains(&b)),
                "{}",
                r.id
            );
            assert!(!r.summary.is_empty() && !r.source.is_empty(), "{}", r.id);
            assert_eq!(find(r.id).map(|f| f.id), Some(r.id));
        }
        assert!(all().len() >= 40, "the catalogue has {} rules", all().len());
        assert!(all().iter().all(|r| !r.hidden));
    }

    /// A rule documented with a code by the emulator and by the suite agree on it.
    #[test]
    fn codes_agree_with_the_emulator_where_both_document_one() {
        for r in all() {
            let Expect::Code(name, code) = r.expect else {
                continue;
            };
            if let Some(e) = devipc_emulator::acl::rules::info(r.id) {
                assert_eq!(e.code, code, "{}", r.id);
            }
            if let Some(e) = devipc_emulator::hip::rules::info(r.id) {
                assert_eq!(e.code, code, "{}", r.id);
            }
            let known = match r.applies {
                Applies::Ascend => devipc_ascend_sys::error_name(code),
                _ => devipc_hip_sys::error_name(code),
            };
            assert_eq!(known, Some(name), "{}", r.id);
        }
    }

    /// A refused `pidfd_getfd` (EPERM), here or in a peer, is a skip with the reason; any
    /// other import error, or another EPERM, is a failure.
    #[test]
    fn a_refused_pidfd_import_is_a_skip() {
        let eperm = || std::io::Error::from_raw_os_error(1);
        let refused = devipc::Error::io(
            "pidfd_getfd of the exporter's fd 7 was refused: it needs ptrace access",
            eperm(),
        );
        let wire = crate::shell::facade::devipc_failure(&refused);
        for stop in [
            Err::<(), _>(refused).imported("import").unwrap_err(),
            Err::<(), _>(wire).imported("peer import").unwrap_err(),
        ] {
            assert!(
                matches!(&stop, Stop::Skip(why) if why.contains("pidfd path is unavailable")),
                "{stop:?}"
            );
        }
        let other = devipc::Error::io("opening /dev/shm/x", eperm());
        assert!(matches!(
            Err::<(), _>(other).imported("import"),
            Err(Stop::Fail(_))
        ));
        let gone = Failure::Devipc {
            kind: "InvalidArgument".into(),
            message: "the exporter (pid 9) is gone: pidfd_getfd cannot".into(),
        };
        assert!(matches!(
            Err::<(), _>(gone).imported("import"),
            Err(Stop::Fail(_))
        ));
    }

    /// Every emulator rule that a vendor rule reuses is breakable where the suite relies on
    /// breaking it, and every vendor rule that names the emulator exists there.
    #[test]
    fn reused_emulator_ids_exist() {
        let reused: Vec<_> = all()
            .into_iter()
            .filter(|r| emulator_enforces(r.id))
            .map(|r| r.id)
            .collect();
        assert!(reused.len() >= 20, "{reused:?}");
        assert!(reused.contains(&"hip.mem.open-in-exporter-rejected"));
        assert!(reused.contains(&"ascend.vmm.same-process-import-rejected"));
        // Every HIP VMM rule of the emulator, breakable or not, has the vendor rule of its
        // id: for the ones that cannot be switched off, that rule (its refusal naming the
        // emulator rule) is the only check (issue 15).
        for e in devipc_emulator::hip::rules::ALL {
            if e.id.starts_with("hip.vmm.") {
                assert!(reused.contains(&e.id), "{} has no catalogue rule", e.id);
            }
        }
    }
}
