//! [`BackendKind`]: which vendor runtime a backend, token or handle belongs to.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};

/// Which vendor runtime a backend, token or handle belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum BackendKind {
    /// Huawei Ascend NPUs through the ACL runtime (`libascendcl.so` / `libacl_rt.so`).
    Ascend,
    /// AMD GPUs through HIP (`libamdhip64.so`).
    Hip,
}

impl BackendKind {
    /// Every backend kind, in a stable order.
    pub const ALL: [BackendKind; 2] = [BackendKind::Ascend, BackendKind::Hip];

    /// Lower-case name used in messages, environment variables and tokens' text.
    pub const fn name(self) -> &'static str {
        match self {
            BackendKind::Ascend => "ascend",
            BackendKind::Hip => "hip",
        }
    }

    /// The name with its indefinite article, for messages: "an ascend", "a hip".
    pub const fn with_article(self) -> &'static str {
        match self {
            BackendKind::Ascend => "an ascend",
            BackendKind::Hip => "a hip",
        }
    }

    /// The environment variable that names this backend's library file exactly.
    pub const fn library_env_var(self) -> &'static str {
        match self {
            BackendKind::Ascend => "DEVIPC_ASCEND_LIB",
            BackendKind::Hip => "DEVIPC_HIP_LIB",
        }
    }

    /// Wire code used in tokens.
    pub(crate) const fn wire(self) -> u8 {
        match self {
            BackendKind::Ascend => 1,
            BackendKind::Hip => 2,
        }
    }

    /// Inverse of [`BackendKind::wire`].
    pub(crate) fn from_wire(code: u8) -> Option<Self> {
        BackendKind::ALL.into_iter().find(|k| k.wire() == code)
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for BackendKind {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        BackendKind::ALL
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| {
                Error::invalid_argument(format!(
                    "unknown backend `{s}`: expected `ascend` or `hip`"
                ))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backend_kind_parses_and_prints() {
        for k in BackendKind::ALL {
            assert_eq!(k.name().parse::<BackendKind>().unwrap(), k);
            assert_eq!(BackendKind::from_wire(k.wire()), Some(k));
        }
        assert_eq!(" HIP ".parse::<BackendKind>().unwrap(), BackendKind::Hip);
        assert!(matches!(
            "cuda".parse::<BackendKind>(),
            Err(Error::InvalidArgument { .. })
        ));
        assert_eq!(BackendKind::from_wire(0), None);
    }
}
