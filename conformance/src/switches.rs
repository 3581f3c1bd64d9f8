//! The emulator's rule switches, and which catalogue rules bear on each.
//!
//! Every rule the emulator enforces has an id (`devipc_emulator::acl::rules::ALL`,
//! `devipc_emulator::hip::rules::ALL`), and `DEVIPC_EMU_BREAK_RULE=<id>` switches exactly
//! that rule off. Rules that are not [breakable](Switch::breakable) cannot be switched
//! off: without them the emulator itself would misbehave (dereference NULL, copy out of
//! bounds, use an allocation that is not there); each still has a catalogue rule bearing
//! on it, which checks the refusal names the rule. Both surfaces mark them
//! (`devipc_emulator::rules::RuleInfo::breakable`, which [`all`] reads), and the
//! emulator's configuration refuses their ids. An emulator rule is vendor behaviour the
//! emulator asserts; the catalogue is what confirms it on a real machine.
//! So every switch must be *caught*: with it switched off, at least one conformance rule
//! fails.
//!
//! The mapping is explicit and lives in the catalogue: a conformance rule bears on the
//! switch of its own id (vendor rules reuse the emulator's id where they check the same
//! rule) and on every switch it lists in [`Rule::catches`]. The mutation sweep
//! (`tests/break_every_rule.rs`) runs, per breakable switch, only the rules that bear on
//! it ([`bearing_on`]), on the emulated backend of the switch's vendor.

use crate::catalogue;
use crate::rule::Rule;
use crate::target::Target;

/// One `DEVIPC_EMU_BREAK_RULE` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Switch {
    /// The emulator rule id.
    pub id: &'static str,
    /// The emulated backend whose surface enforces it.
    pub target: Target,
    /// Whether the emulator honours the switch (`RuleInfo::breakable`): not for rules whose
    /// violation would make the emulator misbehave, whose ids its configuration refuses.
    pub breakable: bool,
}

/// Every switch of both emulated surfaces, ACL first, in the emulator's order.
pub fn all() -> Vec<Switch> {
    let acl = devipc_emulator::acl::rules::ALL.iter().map(|r| Switch {
        id: r.id,
        target: Target::EmulatedAscend,
        breakable: r.breakable,
    });
    let hip = devipc_emulator::hip::rules::ALL.iter().map(|r| Switch {
        id: r.id,
        target: Target::EmulatedHip,
        breakable: r.breakable,
    });
    acl.chain(hip).collect()
}

/// The visible catalogue rules that bear on `switch` and apply to its backend, in
/// catalogue order.
pub fn bearing_on(switch: &Switch) -> Vec<&'static Rule> {
    catalogue::all()
        .into_iter()
        .filter(|r| r.bears_on(switch.id) && r.applies.includes(switch.target.kind()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rule::Applies;

    #[test]
    fn switches_are_the_emulators_rules() {
        let s = all();
        assert_eq!(
            s.len(),
            devipc_emulator::acl::rules::ALL.len() + devipc_emulator::hip::rules::ALL.len()
        );
        for w in &s {
            let scope = w.id.split('.').next().unwrap();
            match w.target {
                Target::EmulatedAscend => assert_eq!(scope, "ascend", "{}", w.id),
                Target::EmulatedHip => assert_eq!(scope, "hip", "{}", w.id),
                other => panic!("{}: target {other}", w.id),
            }
        }
        assert!(s.iter().any(|w| !w.breakable));
        assert!(s.iter().filter(|w| w.breakable).count() >= 40);
        // The HIP rules the emulator cannot switch off are the VMM checks without which
        // there is nothing to use (its `enforced` is never asked for them).
        let hip_fixed: Vec<&str> = s
            .iter()
            .filter(|w| w.target == Target::EmulatedHip && !w.breakable)
            .map(|w| w.id)
            .collect();
        assert!(
            !hip_fixed.is_empty() && hip_fixed.iter().all(|id| id.starts_with("hip.vmm.")),
            "{hip_fixed:?}"
        );
        assert!(
            s.iter()
                .any(|w| w.id == "hip.vmm.access-required" && w.breakable)
        );
    }

    /// A `catches` entry names a real switch of a backend the rule runs on.
    #[test]
    fn catches_name_real_switches() {
        let switches = all();
        for r in catalogue::all() {
            for id in r.catches {
                let w = switches
                    .iter()
                    .find(|w| w.id == *id)
                    .unwrap_or_else(|| panic!("{}: catches unknown switch {id}", r.id));
                assert!(
                    r.applies.includes(w.target.kind()),
                    "{}: catches {id} of another backend",
                    r.id
                );
                assert_ne!(r.id, *id, "{}: lists its own id", r.id);
                assert!(
                    r.applies != Applies::All || r.level == crate::rule::Level::Portable,
                    "{}",
                    r.id
                );
            }
        }
    }

    /// The fast half of the mutation sweep: every switch, breakable or not, has a
    /// catalogue rule bearing on it (the sweep then shows each breakable one is caught).
    #[test]
    fn every_switch_has_a_rule_bearing_on_it() {
        let missing: Vec<&str> = all()
            .iter()
            .filter(|w| bearing_on(w).is_empty())
            .map(|w| w.id)
            .collect();
        assert!(
            missing.is_empty(),
            "{} emulator rules have no conformance rule bearing on them (add a rule with \
             the same id, or list the id in a rule's `catches`):\n{}",
            missing.len(),
            missing.join("\n")
        );
    }
}
