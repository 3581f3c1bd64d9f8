//! [`Target`]: the backend a run checks, as named on the command line.
//!
//! A target is a vendor runtime (real or emulated) and, for the allocation variants
//! (`hip-vmm`, `emulated-hip-vmm`), the mechanism every buffer of the run is allocated
//! for. A variant runs only the rules that concern memory ([`Rule::memory`]), with the
//! same ids, in its own section of the report; the target name travels to every child
//! and peer of the run, so the scenario's process and its facade peers allocate alike.
//!
//! [`Rule::memory`]: crate::rule::Rule::memory

use std::fmt;
use std::str::FromStr;

use devipc::raw::Mechanism;
use devipc::{AllocateOptions, BackendChoice};
use devipc_core::BackendKind;

/// A backend to check: a real vendor runtime or the emulator speaking its ABI, possibly
/// allocating with a mechanism other than the backend's default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Target {
    /// The real ACL runtime (discovered as DESIGN section 8 says).
    Ascend,
    /// The real HIP runtime.
    Hip,
    /// The devipc emulator with the ACL ABI.
    EmulatedAscend,
    /// The devipc emulator with the HIP ABI.
    EmulatedHip,
    /// The real HIP runtime, every buffer allocated for `hip-vmm-fd` (HIP virtual memory
    /// shared as a file descriptor); memory rules only.
    HipVmm,
    /// The emulator with the HIP ABI, every buffer allocated for `hip-vmm-fd`; memory
    /// rules only.
    EmulatedHipVmm,
}

impl Target {
    /// Every target, in report order.
    pub const ALL: [Target; 6] = [
        Target::Ascend,
        Target::Hip,
        Target::EmulatedAscend,
        Target::EmulatedHip,
        Target::HipVmm,
        Target::EmulatedHipVmm,
    ];

    /// The default selection: both emulated backends, and the memory rules again on
    /// emulated HIP with `hip-vmm-fd` memory.
    pub const DEFAULT: [Target; 3] = [
        Target::EmulatedAscend,
        Target::EmulatedHip,
        Target::EmulatedHipVmm,
    ];

    /// Every spelling `--backend` accepts.
    pub const ACCEPTED: &'static str =
        "ascend|hip|emulated-ascend|emulated-hip|hip-vmm|emulated-hip-vmm";

    /// The vendor ABI.
    pub const fn kind(self) -> BackendKind {
        match self {
            Target::Ascend | Target::EmulatedAscend => BackendKind::Ascend,
            Target::Hip | Target::EmulatedHip | Target::HipVmm | Target::EmulatedHipVmm => {
                BackendKind::Hip
            }
        }
    }

    /// Whether this is the emulator.
    pub const fn emulated(self) -> bool {
        matches!(
            self,
            Target::EmulatedAscend | Target::EmulatedHip | Target::EmulatedHipVmm
        )
    }

    /// The mechanism every buffer of the run is allocated for, or `None` for the
    /// backend's default (`Runtime::allocate`).
    pub const fn allocation(self) -> Option<Mechanism> {
        match self {
            Target::HipVmm | Target::EmulatedHipVmm => Some(Mechanism::HipVmmFd),
            _ => None,
        }
    }

    /// The options every buffer of the run is allocated with (`Runtime::allocate_with`).
    pub fn allocate_options(self) -> AllocateOptions {
        self.allocation()
            .map_or_else(AllocateOptions::default, AllocateOptions::mechanism)
    }

    /// The allocation as the report names it: the mechanism, or `default`.
    pub const fn allocation_name(self) -> &'static str {
        match self.allocation() {
            Some(m) => m.name(),
            None => "default",
        }
    }

    /// The name used on the command line and in reports.
    pub const fn name(self) -> &'static str {
        match self {
            Target::Ascend => "ascend",
            Target::Hip => "hip",
            Target::EmulatedAscend => "emulated-ascend",
            Target::EmulatedHip => "emulated-hip",
            Target::HipVmm => "hip-vmm",
            Target::EmulatedHipVmm => "emulated-hip-vmm",
        }
    }

    /// The facade's name for the same choice.
    pub const fn choice(self) -> BackendChoice {
        if self.emulated() {
            BackendChoice::Emulated(self.kind())
        } else {
            BackendChoice::Real(self.kind())
        }
    }

    /// Parses a `--backend` value: one name or a comma-separated list.
    pub fn parse_list(value: &str) -> Result<Vec<Target>, String> {
        value
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::parse)
            .collect()
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Target {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Target::ALL
            .into_iter()
            .find(|t| t.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| format!("unknown backend `{s}`: expected {}", Target::ACCEPTED))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_and_lists() {
        for t in Target::ALL {
            assert_eq!(t.name().parse::<Target>().unwrap(), t);
        }
        assert_eq!(
            Target::parse_list("hip, emulated-ascend").unwrap(),
            [Target::Hip, Target::EmulatedAscend]
        );
        assert!(
            Target::parse_list("cuda")
                .unwrap_err()
                .contains(Target::ACCEPTED)
        );
        assert_eq!(Target::EmulatedHip.kind(), BackendKind::Hip);
        assert_eq!(
            Target::Ascend.choice(),
            BackendChoice::Real(BackendKind::Ascend)
        );
        // The allocation variants: same runtime, another allocation.
        assert_eq!(
            Target::EmulatedHipVmm.choice(),
            Target::EmulatedHip.choice()
        );
        assert_eq!(Target::HipVmm.choice(), Target::Hip.choice());
        assert_eq!(
            Target::EmulatedHipVmm.allocation(),
            Some(Mechanism::HipVmmFd)
        );
        assert_eq!(Target::EmulatedHipVmm.allocation_name(), "hip-vmm-fd");
        assert_eq!(Target::EmulatedHip.allocation(), None);
        assert_eq!(Target::EmulatedHip.allocation_name(), "default");
        assert_eq!(
            Target::EmulatedHipVmm.allocate_options(),
            AllocateOptions::mechanism(Mechanism::HipVmmFd)
        );
    }
}
