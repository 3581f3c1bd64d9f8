//! Options of the [`DeviceIpc`](crate::DeviceIpc) calls that export and allocate: who may
//! import an export ([`ExportOptions`]), how memory is made ([`AllocateOptions`]).

/// Who may import an export.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum PidValidation {
    /// Only processes named by `grant` may import (the vendors' default).
    #[default]
    Trustlist,
    /// Any process on the node may import (`…_DISABLE_PID_VALIDATION`).
    AnyProcess,
}

/// Options for `export`, `export_external` and `export_signal`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ExportOptions {
    /// Who may import.
    pub validation: PidValidation,
}

impl ExportOptions {
    /// Only the processes named by [`DeviceIpc::grant`](crate::DeviceIpc::grant) (or
    /// `grant_signal`) may import: the default, which the vendors call a trustlist
    /// ([`PidValidation::Trustlist`]).
    pub const fn granted_only() -> Self {
        ExportOptions {
            validation: PidValidation::Trustlist,
        }
    }

    /// Any process may import; `grant` becomes unnecessary.
    pub const fn any_process() -> Self {
        ExportOptions {
            validation: PidValidation::AnyProcess,
        }
    }
}

/// Options for `allocate_with`: how the memory is made, which decides how it is shared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AllocateOptions {
    /// The mechanism the memory will be exported with; `None` lets the backend choose its
    /// default for the runtime it runs on.
    pub mechanism: Option<crate::token::Mechanism>,
}

impl AllocateOptions {
    /// Memory for `mechanism` (e.g. [`Mechanism::HipVmmFd`](crate::Mechanism::HipVmmFd):
    /// HIP virtual memory shared as a file descriptor).
    pub const fn mechanism(mechanism: crate::token::Mechanism) -> Self {
        AllocateOptions {
            mechanism: Some(mechanism),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn export_options_default_to_granted_only() {
        assert_eq!(ExportOptions::default(), ExportOptions::granted_only());
        assert_eq!(
            ExportOptions::any_process().validation,
            PidValidation::AnyProcess
        );
    }
}
