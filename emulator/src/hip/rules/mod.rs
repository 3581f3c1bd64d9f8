//! The vendor rules the HIP surface enforces, as data ([`RuleInfo`], shared with the ACL
//! surface): one id per rule, the `hipError_t` a violation returns, and where the rule
//! comes from.
//!
//! Every check in the surface names its rule by one of the constants below and asks
//! [`enforced`] right where it would fail, so `DEVIPC_EMU_BREAK_RULE=<id>` switches exactly
//! that rule off (the conformance suite uses this to show that a rule's scenario can
//! fail). [`ALL`] lists every rule with its code, its [`Basis`] (documented by AMD,
//! observed in the CLR implementation, or chosen by the emulator where the vendor is
//! silent or UNVERIFIED) and its source, citing `/work/shared/research/api-facts.md`
//! sections and ROCm CLR files.
//!
//! A rule whose `code` is `hipSuccess` describes a behaviour rather than a refusal (e.g.
//! "open returns the base"); [`RuleInfo::when_broken`] says what the emulator does
//! instead when the rule is switched off. The VMM checks without which there is nothing
//! to use (no allocation, no mapping, no fd) are not [breakable](RuleInfo::breakable):
//! the configuration refuses their ids ([`crate::rules::parse_break_rules`]), and their
//! `when_broken` says why.
//!
//! One file per family, each with its id constants and its table: `device` (`hipInit`,
//! device identity and visibility, peers), `memory` (IPC memory handles), `event` (events,
//! their IPC handles, stream waits), `vmm`; [`ALL`] joins them.

mod batch;
mod device;
mod event;
mod memory;
mod vmm;

pub use batch::*;
pub use device::*;
pub use event::*;
pub use memory::*;
pub use vmm::*;

pub use crate::rules::{Basis, RuleInfo, enforced};

/// The tables of the files of this module, in the order of [`ALL`].
const TABLES: &[&[RuleInfo]] = &[
    device::RULES,
    memory::RULES,
    event::RULES,
    vmm::RULES,
    batch::RULES,
];

/// Every rule the HIP surface enforces, family by family (`device`, `memory`, `event`,
/// `vmm`, `batch`).
pub const ALL: &[RuleInfo] = &crate::rules::join::<{ crate::rules::total(TABLES) }>(TABLES);

/// The rule with this id, if the HIP surface has one.
pub fn info(id: &str) -> Option<&'static RuleInfo> {
    crate::rules::find(ALL, id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{HipVersion, validate_rule_id};

    #[test]
    fn ids_are_unique_well_formed_and_hip_scoped() {
        let mut ids: Vec<&str> = ALL.iter().map(|r| r.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), ALL.len(), "duplicate rule id");
        for r in ALL {
            validate_rule_id(r.id).unwrap();
            assert!(r.id.starts_with("hip."), "{}", r.id);
            assert!(!r.summary.is_empty() && !r.source.is_empty());
            // Every HIP rule says what happens without it; one that cannot be switched off
            // says so, and why.
            let when_broken = r.when_broken.unwrap_or_default();
            assert!(!when_broken.is_empty(), "{}", r.id);
            assert_eq!(
                !r.breakable,
                when_broken.starts_with("cannot be switched off"),
                "{}",
                r.id
            );
            assert!(
                devipc_hip_sys::error_name(r.code).is_some(),
                "{}: unknown code {}",
                r.id,
                r.code
            );
            assert_eq!(info(r.id), Some(r));
        }
        assert_eq!(info("hip.no-such-rule"), None);
    }

    #[test]
    fn version_bound_rules_exist_from_their_release() {
        let v = |t| HipVersion::parse(t).unwrap();
        let open = info(MEM_OPEN_IN_EXPORTER_REJECTED).unwrap();
        assert!(!open.exists_in(v("5.2")) && !open.exists_in(v("5.5")));
        assert!(open.exists_in(v("5.6")) && open.exists_in(v("6.2")));
        let range = info(MEM_ADDRESS_RANGE_UNKNOWN_NOT_FOUND).unwrap();
        assert!(!range.exists_in(v("5.7")) && range.exists_in(v("6.0")));
        assert!(
            info(MEM_CLOSE_NON_IPC_POINTER_REJECTED)
                .unwrap()
                .exists_in(v("5.2"))
        );
    }

    #[test]
    fn chosen_rules_say_why() {
        let mut chosen = 0;
        for r in ALL {
            if let Basis::Chosen(why) = r.basis {
                assert!(
                    r.summary.contains("emulator") && !why.is_empty(),
                    "{}",
                    r.id
                );
                chosen += 1;
            }
        }
        assert!(chosen > 0);
    }
}
