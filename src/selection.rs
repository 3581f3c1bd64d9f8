//! Which backend to start: parsing `DEVIPC_BACKEND` and choosing the `auto` default.

use std::fmt;
use std::str::FromStr;

use devipc_core::{BackendKind, Error, Result};

/// A backend request, as written in `DEVIPC_BACKEND`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BackendChoice {
    /// The vendor runtime of this kind, discovered and loaded.
    Real(BackendKind),
    /// The devipc emulator speaking this vendor's ABI (host shared memory, no device).
    Emulated(BackendKind),
    /// The first compiled-in vendor runtime that starts.
    Auto,
}

impl BackendChoice {
    /// The environment variable [`Runtime::from_env`](crate::Runtime::from_env) and
    /// [`Runtime::from_env_or`](crate::Runtime::from_env_or) read: `DEVIPC_BACKEND`.
    pub const ENV_VAR: &'static str = "DEVIPC_BACKEND";

    /// Every spelling [`ENV_VAR`](Self::ENV_VAR) accepts.
    pub const ACCEPTED: &'static str = "ascend|hip|emulated-ascend|emulated-hip|auto";

    /// The emulator speaking the ABI of the backend this build prefers (Ascend when both
    /// are compiled in, its trustlists making the stricter default; else the one compiled
    /// in): what demos and tests run on without a device, as
    /// `Runtime::from_env_or(BackendChoice::emulated_default())`.
    pub const fn emulated_default() -> BackendChoice {
        BackendChoice::Emulated(DEFAULT_KIND)
    }

    /// The order `auto` tries real runtimes in: the compiled-in backends.
    pub fn auto_order() -> &'static [BackendKind] {
        crate::raw::Backend::COMPILED
    }
}

impl FromStr for BackendChoice {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let s = s.trim().to_ascii_lowercase();
        if s == "auto" {
            return Ok(BackendChoice::Auto);
        }
        let (emulated, kind) = match s.strip_prefix("emulated-") {
            Some(rest) => (true, rest),
            None => (false, s.as_str()),
        };
        let kind: BackendKind = kind.parse().map_err(|_| {
            Error::invalid_argument(format!(
                "{}=`{s}` is not one of {}",
                BackendChoice::ENV_VAR,
                BackendChoice::ACCEPTED
            ))
        })?;
        Ok(if emulated {
            BackendChoice::Emulated(kind)
        } else {
            BackendChoice::Real(kind)
        })
    }
}

impl fmt::Display for BackendChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BackendChoice::Real(k) => write!(f, "{k}"),
            BackendChoice::Emulated(k) => write!(f, "emulated-{k}"),
            BackendChoice::Auto => f.write_str("auto"),
        }
    }
}

cfg_if::cfg_if! {
    if #[cfg(all(feature = "ascend", not(feature = "hip")))] {
        /// The backend `auto` and the demos prefer in this build (the only one compiled in).
        const DEFAULT_KIND: BackendKind = BackendKind::Ascend;
    } else if #[cfg(all(feature = "hip", not(feature = "ascend")))] {
        /// The backend `auto` and the demos prefer in this build (the only one compiled in).
        const DEFAULT_KIND: BackendKind = BackendKind::Hip;
    } else {
        /// The backend `auto` and the demos prefer in this build. With both compiled in,
        /// Ascend comes first: its trustlists make the stricter default.
        const DEFAULT_KIND: BackendKind = BackendKind::Ascend;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_accepted_spelling() {
        assert_eq!(
            "ascend".parse::<BackendChoice>().unwrap(),
            BackendChoice::Real(BackendKind::Ascend)
        );
        assert_eq!(
            " HIP ".parse::<BackendChoice>().unwrap(),
            BackendChoice::Real(BackendKind::Hip)
        );
        assert_eq!(
            "emulated-ascend".parse::<BackendChoice>().unwrap(),
            BackendChoice::Emulated(BackendKind::Ascend)
        );
        assert_eq!(
            "emulated-hip".parse::<BackendChoice>().unwrap(),
            BackendChoice::Emulated(BackendKind::Hip)
        );
        assert_eq!(
            "auto".parse::<BackendChoice>().unwrap(),
            BackendChoice::Auto
        );
        for spelling in BackendChoice::ACCEPTED.split('|') {
            let choice: BackendChoice = spelling.parse().unwrap();
            assert_eq!(choice.to_string(), spelling);
        }
    }

    #[test]
    fn rejects_unknown_backends_with_the_accepted_list() {
        for bad in ["cuda", "emulated-", "emulated-cuda", ""] {
            let err = bad.parse::<BackendChoice>().unwrap_err().to_string();
            assert!(err.contains(BackendChoice::ACCEPTED), "{err}");
        }
    }

    #[test]
    fn default_kind_is_compiled_in() {
        assert!(crate::raw::Backend::is_compiled(DEFAULT_KIND));
        assert_eq!(BackendChoice::auto_order().first(), Some(&DEFAULT_KIND));
        assert_eq!(
            BackendChoice::emulated_default(),
            BackendChoice::Emulated(DEFAULT_KIND)
        );
    }
}
