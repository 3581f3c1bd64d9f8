//! [`Target`]: the backend a run checks, as named on the command line.

use std::fmt;
use std::str::FromStr;

use devipc::BackendChoice;
use devipc_core::BackendKind;

/// A backend to check: a real vendor runtime or the emulator speaking its ABI.
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
}

impl Target {
    /// Every target, in report order.
    pub const ALL: [Target; 4] = [
        Target::Ascend,
        Target::Hip,
        Target::EmulatedAscend,
        Target::EmulatedHip,
    ];

    /// The default selection: both emulated backends.
    pub const DEFAULT: [Target; 2] = [Target::EmulatedAscend, Target::EmulatedHip];

    /// Every spelling `--backend` accepts.
    pub const ACCEPTED: &'static str = "ascend|hip|emulated-ascend|emulated-hip";

    /// The vendor ABI.
    pub const fn kind(self) -> BackendKind {
        match self {
            Target::Ascend | Target::EmulatedAscend => BackendKind::Ascend,
            Target::Hip | Target::EmulatedHip => BackendKind::Hip,
        }
    }

    /// Whether this is the emulator.
    pub const fn emulated(self) -> bool {
        matches!(self, Target::EmulatedAscend | Target::EmulatedHip)
    }

    /// The name used on the command line and in reports.
    pub const fn name(self) -> &'static str {
        match self {
            Target::Ascend => "ascend",
            Target::Hip => "hip",
            Target::EmulatedAscend => "emulated-ascend",
            Target::EmulatedHip => "emulated-hip",
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
    }
}
