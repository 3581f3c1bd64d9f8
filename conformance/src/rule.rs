//! The rule model: a rule is data (STYLE pattern 11).
//!
//! A [`Rule`] names one documented vendor rule or one devipc guarantee: a stable id, its
//! [`Level`], the backends it [`Applies`] to, the document it comes from, what it
//! [`Expect`]s, what it [`Need`]s from the machine, and a [`Scenario`] that checks it. The
//! runner reads everything but the scenario to decide whether a rule runs on a backend
//! and to report it; only the scenario touches a runtime. A scenario ends in a
//! [`Verdict`]: it passed (with what it observed), it failed (with why), or it found that
//! it cannot run here (skipped, with why). Nothing turns "could not run" into "passed".

use std::fmt;

use devipc_core::BackendKind;

use crate::ctx::Ctx;
use crate::target::Target;

/// Whether a rule is the vendor's or devipc's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Level {
    /// What the vendor runtime documents (or its implementation shows); checked through the
    /// raw vendor function table, so it holds for the emulator and for the real runtime.
    Vendor,
    /// A portable guarantee of devipc (DESIGN section 5), checked through the facade.
    Portable,
}

impl Level {
    /// `vendor` or `portable`.
    pub const fn name(self) -> &'static str {
        match self {
            Level::Vendor => "vendor",
            Level::Portable => "portable",
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which backends a rule applies to. A rule does not appear at all in the report of a
/// backend it does not apply to (that is not a skip).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Applies {
    /// Ascend only (real ACL runtime and emulated).
    Ascend,
    /// HIP only (real HIP runtime and emulated).
    Hip,
    /// Every backend.
    All,
}

impl Applies {
    /// Whether the rule applies to backends of `kind`.
    pub fn includes(self, kind: BackendKind) -> bool {
        match self {
            Applies::Ascend => kind == BackendKind::Ascend,
            Applies::Hip => kind == BackendKind::Hip,
            Applies::All => true,
        }
    }

    /// `ascend`, `hip` or `all`.
    pub const fn name(self) -> &'static str {
        match self {
            Applies::Ascend => "ascend",
            Applies::Hip => "hip",
            Applies::All => "all",
        }
    }
}

/// What a rule needs from the machine; an unmet need skips the rule with its reason.
///
/// Every rule needs a started backend (a device) unless it lists [`Need::LibraryOnly`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Need {
    /// At least this many devices.
    Devices(u32),
    /// Device 0 can access device 1 (`aclrtDeviceCanAccessPeer` / `hipDeviceCanAccessPeer`).
    PeerAccess,
    /// Only the vendor library, no device: runs even when the backend cannot start
    /// because the machine has no device.
    LibraryOnly,
    /// Only on the devipc emulator; the reason says why the real runtime is not checked.
    EmulatorOnly(&'static str),
    /// Only on a real vendor runtime; the reason says why the emulator cannot show it.
    RealOnly(&'static str),
    /// At least this HIP version, real or emulated (the emulator's answers follow
    /// `DEVIPC_EMU_HIP_VERSION`); the reason says what older runtimes do.
    HipAtLeast {
        /// Major version.
        major: u32,
        /// Minor version.
        minor: u32,
        /// Why older runtimes are not checked.
        why: &'static str,
    },
}

impl fmt::Display for Need {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Need::Devices(n) => write!(f, "{n}+ devices"),
            Need::PeerAccess => f.write_str("peer access 0<->1"),
            Need::LibraryOnly => f.write_str("library only (no device)"),
            Need::EmulatorOnly(_) => f.write_str("emulator only"),
            Need::RealOnly(_) => f.write_str("real runtime only"),
            Need::HipAtLeast { major, minor, .. } => write!(f, "HIP >= {major}.{minor}"),
        }
    }
}

/// What the rule expects the runtime to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Expect {
    /// The violating call fails with this documented code (name, value).
    Code(&'static str, i32),
    /// The violating call is refused; the vendor does not document the code (api-facts
    /// D.4), so any error code passes and the report shows which one came back.
    Refused,
    /// A behaviour: the scenario's calls succeed and observe what the summary says.
    Behaviour,
}

impl fmt::Display for Expect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expect::Code(name, code) => write!(f, "{name} ({code})"),
            Expect::Refused => f.write_str("refused (code undocumented)"),
            Expect::Behaviour => f.write_str("behaviour"),
        }
    }
}

/// How a scenario ended, other than passing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// The rule does not hold (or the scenario could not be carried out as written).
    Fail(String),
    /// The rule cannot be checked here, with the reason; never counted as a pass.
    Skip(String),
}

impl Stop {
    /// A failure with this detail.
    pub fn fail(detail: impl Into<String>) -> Stop {
        Stop::Fail(detail.into())
    }
}

impl From<devipc_core::Error> for Stop {
    fn from(e: devipc_core::Error) -> Stop {
        Stop::Fail(e.to_string())
    }
}

/// A scenario's result: `Ok(what it observed)` when the rule holds.
pub type Verdict = Result<String, Stop>;

/// The code that checks a rule, run in a child process of the runner.
pub type Scenario = fn(&mut Ctx) -> Verdict;

/// One rule of the catalogue.
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    /// Stable id, `<scope>.<family>.<rule>`, e.g. `ascend.vmm.same-process-import-rejected`.
    /// Where the emulator enforces the same rule, the id is the emulator's.
    pub id: &'static str,
    /// Vendor rule or portable guarantee.
    pub level: Level,
    /// The backends it applies to.
    pub applies: Applies,
    /// The rule in one sentence.
    pub summary: &'static str,
    /// The vendor document and section (or DESIGN section) it comes from.
    pub source: &'static str,
    /// What the runtime is expected to do.
    pub expect: Expect,
    /// What the machine must offer.
    pub needs: &'static [Need],
    /// The check.
    pub scenario: Scenario,
    /// Test-only rules: not listed or run unless the self-test knob is set.
    pub hidden: bool,
    /// Emulator rule switches (`DEVIPC_EMU_BREAK_RULE` values) this rule also catches,
    /// besides the emulator rule of its own id: with one of them switched off, the
    /// scenario fails. The mutation sweep (`tests/break_every_rule.rs`) runs, per switch,
    /// only the rules that name it here or carry its id ([`Rule::bears_on`]).
    pub catches: &'static [&'static str],
    /// A rule about memory that devipc allocates: besides the backend's own targets, it
    /// runs on the allocation variants ([`Target::allocation`]), where the scenario's
    /// process and its facade peers allocate every buffer for the variant's mechanism
    /// (through [`Ctx::allocate`](crate::ctx::Ctx::allocate) and the facade shell's
    /// `alloc`). Same id, one more section of the report.
    pub memory: bool,
}

impl Rule {
    /// Whether the rule can run without a device.
    pub fn library_only(&self) -> bool {
        self.needs.contains(&Need::LibraryOnly)
    }

    /// The same rule, declaring that it also catches these emulator rule switches (see
    /// [`Rule::catches`]).
    pub const fn catching(self, switches: &'static [&'static str]) -> Rule {
        Rule {
            catches: switches,
            ..self
        }
    }

    /// The same rule, marked as a memory rule (see [`Rule::memory`]).
    pub const fn memory_rule(self) -> Rule {
        Rule {
            memory: true,
            ..self
        }
    }

    /// Whether the rule runs on `target`: it applies to the target's backend kind, and,
    /// on an allocation variant, it is a memory rule.
    pub fn runs_on(&self, target: Target) -> bool {
        self.applies.includes(target.kind()) && (target.allocation().is_none() || self.memory)
    }

    /// Whether breaking emulator rule `switch` should make this rule fail: the rule has
    /// the switch's id, or lists it in [`Rule::catches`].
    pub fn bears_on(&self, switch: &str) -> bool {
        self.id == switch || self.catches.contains(&switch)
    }
}

/// Whether `id` matches `pattern`: a glob when it contains `*` or `?` (matched against the
/// whole id), otherwise a substring.
pub fn matches(pattern: &str, id: &str) -> bool {
    if !pattern.contains(['*', '?']) {
        return id.contains(pattern);
    }
    glob(pattern.as_bytes(), id.as_bytes())
}

/// Iterative glob match with `*` (any run) and `?` (one byte).
fn glob(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && (pattern[p] == b'?' || pattern[p] == text[t]) {
            p += 1;
            t += 1;
        } else if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p, t));
            p += 1;
        } else if let Some((sp, st)) = star {
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns() {
        let id = "ascend.vmm.same-process-import-rejected";
        assert!(matches("vmm", id));
        assert!(matches("ascend.vmm.*", id));
        assert!(matches("*import*", id));
        assert!(matches("ascend.???.same*", id));
        assert!(!matches("hip.*", id));
        assert!(!matches("ascend.vmm", "hip.mem.x"));
        assert!(!matches("ascend.vmm.*x", id));
        assert!(matches("*", id));
    }

    /// An allocation variant runs the memory rules of its backend kind and nothing else;
    /// the plain targets run what applies to their kind, memory rules or not.
    #[test]
    fn variants_run_only_memory_rules() {
        let all = crate::catalogue::all();
        let on = |t: Target| all.iter().filter(|r| r.runs_on(t)).count();
        for r in &all {
            assert!(
                !r.memory || r.level == Level::Portable,
                "{}: only portable rules go through the facade's allocation",
                r.id
            );
            assert_eq!(r.runs_on(Target::EmulatedHipVmm), r.memory, "{}", r.id);
            assert_eq!(r.runs_on(Target::HipVmm), r.memory, "{}", r.id);
            assert_eq!(
                r.runs_on(Target::EmulatedHip),
                r.applies.includes(BackendKind::Hip),
                "{}",
                r.id
            );
        }
        assert_eq!(on(Target::EmulatedHipVmm), 12);
        assert!(on(Target::EmulatedHip) > on(Target::EmulatedHipVmm) + 40);
    }
}
