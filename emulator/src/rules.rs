//! What a vendor rule of the emulator is, for both surfaces: the shape of a rule
//! ([`RuleInfo`]), where its code comes from ([`Basis`]), and the one switch that turns a
//! rule off for a test run (`DEVIPC_EMU_BREAK_RULE`).
//!
//! The ACL surface lists its rules in [`crate::acl::rules::ALL`], the HIP surface in
//! [`crate::hip::rules::ALL`]: one table per vendor, of this one type, written as struct
//! literals one mechanism per file. Every check of a surface names its rule by id, and
//! asks [`enforced`] right where it would fail, so `DEVIPC_EMU_BREAK_RULE=<id>` switches
//! exactly that rule off (the conformance suite uses this to show that a rule's scenario
//! can fail). A rule without which the emulator itself would misbehave (dereference NULL,
//! address a missing device or object, copy out of bounds) is not
//! [breakable](RuleInfo::breakable): [`parse_break_rules`], which reads the variable for
//! both surfaces, refuses its id, as it refuses an id no surface has.

use std::ffi::c_int;

use crate::config::{Config, HipVersion, validate_rule_id};

/// Where a rule (or the code it returns) comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Basis {
    /// The vendor documents it (header comments, API reference), or its runtime source
    /// shows the code for this violation (the ACL table does not tell the two apart).
    Documented,
    /// The vendor does not document it, but its runtime implements it (the HIP table: the
    /// CLR runtime of ROCm 6.2).
    Implementation,
    /// The vendor is silent or the behaviour is UNVERIFIED: the emulator chose, for the
    /// given reason.
    Chosen(&'static str),
    /// A behavioural rule of the ACL table: the scenario succeeds (code 0) and observes
    /// what the summary says. (The HIP table gives its behaviour rules, `hipSuccess`, one
    /// of the bases above.)
    Behaviour,
}

/// One rule a surface enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RuleInfo {
    /// Stable id, `<vendor>.<family>.<rule>`, e.g. `ascend.vmm.same-process-import-rejected`
    /// or `hip.mem.open-in-exporter-rejected`.
    pub id: &'static str,
    /// The status a violation returns (an `aclError` or a `hipError_t`, both a C `int`);
    /// 0 for a rule that describes a behaviour rather than a refusal.
    pub code: c_int,
    /// Documented, implemented or chosen (and why).
    pub basis: Basis,
    /// Whether `DEVIPC_EMU_BREAK_RULE` can switch the rule off. A rule that is not
    /// breakable is enforced whatever the variable says, and naming it there is a
    /// configuration error.
    pub breakable: bool,
    /// What the rule says, in one line or a few sentences.
    pub summary: &'static str,
    /// What the emulator does instead when the rule is switched off, where the table
    /// says (every HIP rule; for one that is not breakable, why it cannot be).
    pub when_broken: Option<&'static str>,
    /// The vendor source of the rule (api-facts section, vendor document or runtime file).
    pub source: &'static str,
    /// The first runtime version `(major, minor)` that has the rule, `None` for every
    /// version. Only HIP rules depend on the emulated version: an older version behaves
    /// as [`RuleInfo::summary`] says for it, whether or not `DEVIPC_EMU_BREAK_RULE` names
    /// the rule.
    pub since: Option<(u32, u32)>,
}

impl RuleInfo {
    /// Whether the emulated HIP `version` has this rule at all.
    pub fn exists_in(&self, version: HipVersion) -> bool {
        self.since
            .is_none_or(|(major, minor)| version.at_least(major, minor))
    }
}

/// The rule with this id, of either surface.
pub fn info(id: &str) -> Option<&'static RuleInfo> {
    find(crate::acl::rules::ALL, id).or_else(|| find(crate::hip::rules::ALL, id))
}

/// The rule with this id in `table`.
pub(crate) fn find(table: &'static [RuleInfo], id: &str) -> Option<&'static RuleInfo> {
    table.iter().find(|r| r.id == id)
}

/// Whether a surface enforces `id` in this process: true unless `DEVIPC_EMU_BREAK_RULE`
/// names it and the rule is breakable. A process whose configuration does not parse
/// enforces every rule (its state-using calls fail anyway).
pub fn enforced(id: &str) -> bool {
    let broken = Config::global().is_ok_and(|c| c.rule_broken(id));
    !broken || !info(id).is_some_and(|r| r.breakable)
}

/// Reads `DEVIPC_EMU_BREAK_RULE` (comma-separated rule ids) for both surfaces: the ids,
/// or why the value is refused. A malformed id, an id that no surface has, and a rule
/// that cannot be switched off are refused, naming the id: each would break nothing and
/// look like a passing mutation.
pub fn parse_break_rules(text: &str) -> Result<Vec<String>, String> {
    text.split(',')
        .map(|id| switchable(id).map(|rule| rule.id.to_owned()))
        .collect()
}

/// The rule `id` names, if `DEVIPC_EMU_BREAK_RULE` may switch it off.
fn switchable(id: &str) -> Result<&'static RuleInfo, String> {
    validate_rule_id(id)?;
    let rule = info(id).ok_or_else(|| {
        format!("`{id}` is not a rule of the emulator (see acl::rules, hip::rules)")
    })?;
    if !rule.breakable {
        return Err(format!(
            "`{id}` cannot be switched off: without it the emulator itself would do what the \
             vendor refuses (dereference NULL, address a missing device or object, copy out of \
             bounds)"
        ));
    }
    Ok(rule)
}

/// A surface's rule table, joined at compile time from its per-mechanism tables (in the
/// order given): `N` is [`total`] of `tables`.
pub(crate) const fn join<const N: usize>(tables: &[&[RuleInfo]]) -> [RuleInfo; N] {
    const EMPTY: RuleInfo = RuleInfo {
        id: "",
        code: 0,
        basis: Basis::Behaviour,
        breakable: false,
        summary: "",
        when_broken: None,
        source: "",
        since: None,
    };
    let mut all = [EMPTY; N];
    let (mut t, mut n) = (0, 0);
    while t < tables.len() {
        let mut i = 0;
        while i < tables[t].len() {
            all[n] = tables[t][i];
            n += 1;
            i += 1;
        }
        t += 1;
    }
    assert!(n == N, "N is the total of the tables");
    all
}

/// The number of rules in `tables`.
pub(crate) const fn total(tables: &[&[RuleInfo]]) -> usize {
    let (mut t, mut n) = (0, 0);
    while t < tables.len() {
        n += tables[t].len();
        t += 1;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_across_both_surfaces() {
        let mut ids: Vec<&str> = crate::acl::rules::ALL
            .iter()
            .chain(crate::hip::rules::ALL)
            .map(|r| r.id)
            .collect();
        let n = ids.len();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), n, "an id in both tables");
        for id in ids {
            assert_eq!(info(id).map(|r| r.id), Some(id));
        }
        assert_eq!(info("hip.no-such-rule"), None);
    }

    #[test]
    fn break_rules_are_parsed_the_same_for_both_surfaces() {
        let two = "hip.mem.open-returns-base,ascend.ipc-key.trustlist-required";
        assert_eq!(
            parse_break_rules(two).unwrap(),
            [
                "hip.mem.open-returns-base",
                "ascend.ipc-key.trustlist-required"
            ]
        );
        let fixed = |id: &str| {
            format!(
                "`{id}` cannot be switched off: without it the emulator itself would do what \
                 the vendor refuses (dereference NULL, address a missing device or object, copy \
                 out of bounds)"
            )
        };
        let unbreakable: Vec<&RuleInfo> = crate::acl::rules::ALL
            .iter()
            .chain(crate::hip::rules::ALL)
            .filter(|r| !r.breakable)
            .collect();
        for vendor in ["ascend.", "hip."] {
            assert!(unbreakable.iter().any(|r| r.id.starts_with(vendor)));
        }
        for r in unbreakable {
            assert_eq!(parse_break_rules(r.id), Err(fixed(r.id)));
            // Also inside a list of rules that can be switched off.
            let list = format!("hip.mem.open-returns-base,{}", r.id);
            assert_eq!(parse_break_rules(&list), Err(fixed(r.id)));
        }
        for missing in ["ascend.no-such-rule", "hip.no-such-rule"] {
            assert_eq!(
                parse_break_rules(missing),
                Err(format!(
                    "`{missing}` is not a rule of the emulator (see acl::rules, hip::rules)"
                ))
            );
        }
        assert!(parse_break_rules("hip.mem.open-returns-base,").is_err());
    }

    #[test]
    fn joined_tables_keep_their_order() {
        const A: &[RuleInfo] = &[RuleInfo {
            id: "x.a.one",
            code: 1,
            basis: Basis::Documented,
            breakable: true,
            summary: "one",
            when_broken: None,
            source: "s",
            since: None,
        }];
        const B: &[RuleInfo] = &[RuleInfo {
            id: "x.b.two",
            code: 0,
            basis: Basis::Chosen("why"),
            breakable: false,
            summary: "two",
            when_broken: Some("cannot be switched off"),
            source: "s",
            since: Some((6, 2)),
        }];
        const TABLES: &[&[RuleInfo]] = &[A, &[], B];
        const ALL: &[RuleInfo] = &join::<{ total(TABLES) }>(TABLES);
        assert_eq!(ALL, [A[0], B[0]]);
    }
}
