//! The table of error kinds: one row per [`Error`] variant, written once.
//!
//! Each row gives the kind's stable name ([`Error::kind`], reports and logs), its stable
//! numeric code (the C ABI's result codes), the Python exception class the bindings raise
//! for it and that class's parent, and a one-line doc (the [`ErrorKind`] variant's doc and
//! the Python class's docstring). The [`error_kinds!`] macro below turns the table into
//! [`ErrorKind`], its accessors and [`Error::error_kind`]; the Python package creates its
//! exception classes by iterating [`ErrorKind::ALL`].
//!
//! # Codes are forever
//!
//! A code, once released, names its kind for good: it is never renumbered and never
//! reused, also not after its kind is removed (the code then moves to [`RETIRED_CODES`]).
//! A new kind takes the next unused number. 0 is no kind: the C ABI's "success".
//! The tests pin every row's name and code.

use super::Error;

/// Codes that named a kind that no longer exists: never given to another kind.
pub const RETIRED_CODES: &[u32] = &[];

/// Declares [`ErrorKind`] from the table rows (see the module docs for the columns).
macro_rules! error_kinds {
    [$(
        $variant:ident {
            name: $name:literal,
            code: $code:literal,
            python_class: $class:literal,
            python_parent: $parent:literal,
            doc: $doc:literal $(,)?
        }
    ),* $(,)?] => {
        /// The kind of an [`Error`]: which variant it is, without its fields
        /// ([`Error::error_kind`]).
        ///
        /// Each kind has a stable name ([`name`](ErrorKind::name), what
        /// [`Error::kind`] returns), a stable numeric [`code`](ErrorKind::code) (the C
        /// ABI's result code) and a Python exception class. A code, once released, names
        /// its kind for good: it is never renumbered and never reused, also not after its
        /// kind is removed ([`RETIRED_CODES`]); 0 is no kind (the C ABI's success).
        ///
        /// Non-exhaustive: new kinds may be added in minor releases (with new codes).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum ErrorKind {
            $(
                #[doc = $doc]
                $variant,
            )*
        }

        impl ErrorKind {
            /// Every kind, in the table's order (ascending code).
            pub const ALL: &'static [ErrorKind] = &[$(ErrorKind::$variant),*];

            /// The stable snake_case name, e.g. `invalid_token` ([`Error::kind`]).
            pub const fn name(self) -> &'static str {
                match self {
                    $(ErrorKind::$variant => $name,)*
                }
            }

            /// The stable numeric code (never 0, never reused; see the module docs).
            pub const fn code(self) -> u32 {
                match self {
                    $(ErrorKind::$variant => $code,)*
                }
            }

            /// The name of the Python exception class for this kind, e.g.
            /// `InvalidTokenError` (in `devipc.errors`).
            pub const fn python_class(self) -> &'static str {
                match self {
                    $(ErrorKind::$variant => $class,)*
                }
            }

            /// The name of the Python class's parent: `DevipcError`, or the class of a kind
            /// earlier in [`ErrorKind::ALL`].
            pub const fn python_parent(self) -> &'static str {
                match self {
                    $(ErrorKind::$variant => $parent,)*
                }
            }

            /// One line on what the kind means (also the Python class's docstring).
            pub const fn doc(self) -> &'static str {
                match self {
                    $(ErrorKind::$variant => $doc,)*
                }
            }
        }

        impl Error {
            /// The kind of this error (its row in the table of kinds).
            pub fn error_kind(&self) -> ErrorKind {
                // Exhaustive inside this crate: a variant without a row does not compile.
                match self {
                    $(Error::$variant { .. } => ErrorKind::$variant,)*
                }
            }
        }
    };
}

error_kinds![
    LibraryNotFound {
        name: "library_not_found",
        code: 1,
        python_class: "LibraryNotFoundError",
        python_parent: "DevipcError",
        doc: "No candidate path held a loadable vendor library."
    },
    MissingSymbol {
        name: "missing_symbol",
        code: 2,
        python_class: "MissingSymbolError",
        python_parent: "DevipcError",
        doc: "The vendor library lacks a symbol devipc requires."
    },
    Vendor {
        name: "vendor",
        code: 3,
        python_class: "VendorError",
        python_parent: "DevipcError",
        doc: "A vendor call failed: backend, api, code, name and message say which and why."
    },
    NoBackendStarted {
        name: "no_backend_started",
        code: 4,
        python_class: "NoBackendStartedError",
        python_parent: "DevipcError",
        doc: "No backend could start; each backend tried is kept with its own error."
    },
    Config {
        name: "config",
        code: 5,
        python_class: "ConfigError",
        python_parent: "DevipcError",
        doc: "devipc's own configuration (an environment variable, a directory) is unusable."
    },
    InvalidToken {
        name: "invalid_token",
        code: 6,
        python_class: "InvalidTokenError",
        python_parent: "DevipcError",
        doc: "A string is not a valid devipc token."
    },
    BackendMismatch {
        name: "backend_mismatch",
        code: 7,
        python_class: "BackendMismatchError",
        python_parent: "DevipcError",
        doc: "A token belongs to another backend than the runtime asked to use it."
    },
    Unsupported {
        name: "unsupported",
        code: 8,
        python_class: "UnsupportedError",
        python_parent: "DevipcError",
        doc: "The backend or this runtime version cannot do what was asked."
    },
    InvalidDevice {
        name: "invalid_device",
        code: 9,
        python_class: "InvalidDeviceError",
        python_parent: "DevipcError",
        doc: "A device id outside the devices the backend reports."
    },
    DeviceNotVisible {
        name: "device_not_visible",
        code: 10,
        python_class: "DeviceNotVisibleError",
        python_parent: "DevipcError",
        doc: "The token's device is not among the devices this process sees (another visibility mask)."
    },
    InvalidArgument {
        name: "invalid_argument",
        code: 11,
        python_class: "InvalidArgumentError",
        python_parent: "DevipcError",
        doc: "An argument is out of range or inconsistent."
    },
    UnknownHandle {
        name: "unknown_handle",
        code: 12,
        python_class: "UnknownHandleError",
        python_parent: "DevipcError",
        doc: "A handle already closed or freed, or of another runtime."
    },
    InheritedAcrossFork {
        name: "inherited_across_fork",
        code: 13,
        python_class: "InheritedAcrossForkError",
        python_parent: "DevipcError",
        doc: "A runtime, buffer or signal used in a child forked after it was made: open a new Runtime in the child (or use the 'spawn' start method)."
    },
    Timeout {
        name: "timeout",
        code: 14,
        python_class: "TimedOutError",
        python_parent: "DevipcError",
        doc: "A blocking operation did not complete in time."
    },
    Io {
        name: "io",
        code: 15,
        python_class: "DevipcIOError",
        python_parent: "DevipcError",
        doc: "An operating-system call failed."
    },
    Copy {
        name: "copy",
        code: 16,
        python_class: "CopyError",
        python_parent: "DevipcError",
        doc: "A copy of a batch was refused when enqueued: the index of the first failing descriptor and why."
    },
];

impl ErrorKind {
    /// The kind whose [`code`](ErrorKind::code) is `code`, if any.
    pub fn from_code(code: u32) -> Option<ErrorKind> {
        ErrorKind::ALL.iter().copied().find(|k| k.code() == code)
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::path::PathBuf;
    use std::time::Duration;

    use super::*;
    use crate::backend_kind::BackendKind;
    use crate::ids::DeviceId;
    use crate::physical::PhysicalDevice;

    /// The released rows: a failure here means a name or code changed, which breaks
    /// every C caller and log reader. Add new kinds at the end; never edit a line.
    const RELEASED: &[(&str, u32, &str)] = &[
        ("library_not_found", 1, "LibraryNotFoundError"),
        ("missing_symbol", 2, "MissingSymbolError"),
        ("vendor", 3, "VendorError"),
        ("no_backend_started", 4, "NoBackendStartedError"),
        ("config", 5, "ConfigError"),
        ("invalid_token", 6, "InvalidTokenError"),
        ("backend_mismatch", 7, "BackendMismatchError"),
        ("unsupported", 8, "UnsupportedError"),
        ("invalid_device", 9, "InvalidDeviceError"),
        ("device_not_visible", 10, "DeviceNotVisibleError"),
        ("invalid_argument", 11, "InvalidArgumentError"),
        ("unknown_handle", 12, "UnknownHandleError"),
        ("inherited_across_fork", 13, "InheritedAcrossForkError"),
        ("timeout", 14, "TimedOutError"),
        ("io", 15, "DevipcIOError"),
        ("copy", 16, "CopyError"),
    ];

    #[test]
    fn names_codes_and_classes_are_stable() {
        let rows: Vec<_> = ErrorKind::ALL
            .iter()
            .map(|k| (k.name(), k.code(), k.python_class()))
            .collect();
        assert_eq!(rows, RELEASED);
    }

    #[test]
    fn codes_are_unique_nonzero_ascending_and_not_retired() {
        let mut previous = 0;
        for k in ErrorKind::ALL {
            assert!(k.code() > previous, "{k}: codes ascend from 1");
            assert!(!RETIRED_CODES.contains(&k.code()), "{k}: retired code");
            assert_eq!(ErrorKind::from_code(k.code()), Some(*k));
            previous = k.code();
        }
        assert_eq!(ErrorKind::from_code(0), None);
        let names: HashSet<_> = ErrorKind::ALL.iter().map(|k| k.name()).collect();
        let classes: HashSet<_> = ErrorKind::ALL.iter().map(|k| k.python_class()).collect();
        assert_eq!(names.len(), ErrorKind::ALL.len());
        assert_eq!(classes.len(), ErrorKind::ALL.len());
    }

    #[test]
    fn every_row_is_well_formed() {
        let mut defined = vec!["DevipcError"];
        for k in ErrorKind::ALL {
            let name = k.name();
            assert!(
                !name.is_empty() && name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
                "{name}"
            );
            let class = k.python_class();
            assert!(class.ends_with("Error"), "{class}");
            assert!(class.bytes().all(|b| b.is_ascii_alphanumeric()), "{class}");
            // A parent is the base class or a class created before this one.
            assert!(
                defined.contains(&k.python_parent()),
                "{k}: {}",
                k.python_parent()
            );
            defined.push(class);
            let doc = k.doc();
            assert!(doc.ends_with('.') && !doc.contains('\n'), "{k}: {doc:?}");
            assert_eq!(k.to_string(), name);
        }
    }

    /// One value of every variant: the match is exhaustive (this crate sees every
    /// variant), so a new variant fails to compile here until it has a value and a row.
    fn one_of_each() -> Vec<Error> {
        let all = vec![
            Error::LibraryNotFound {
                backend: BackendKind::Hip,
                tried: vec![],
            },
            Error::MissingSymbol {
                library: PathBuf::from("libx.so"),
                symbol: "x",
            },
            Error::Vendor {
                backend: BackendKind::Ascend,
                api: "aclInit",
                code: 1,
                name: "ACL_ERROR".into(),
                message: String::new(),
            },
            Error::NoBackendStarted { attempts: vec![] },
            Error::config("x", "y"),
            Error::invalid_token("x"),
            Error::BackendMismatch {
                expected: "hip".into(),
                found: "ascend".into(),
            },
            Error::unsupported(BackendKind::Hip, "x"),
            Error::InvalidDevice {
                device: DeviceId(3),
                count: 1,
            },
            Error::DeviceNotVisible {
                device: PhysicalDevice::UNKNOWN,
                visibility: vec![],
            },
            Error::invalid_argument("x"),
            Error::UnknownHandle {
                kind: "allocation",
                id: 1,
            },
            Error::InheritedAcrossFork {
                what: "this Runtime",
                creator: 1,
                current: 2,
            },
            Error::Timeout {
                what: "x".into(),
                after: Duration::ZERO,
            },
            Error::io("x", std::io::Error::other("y")),
            Error::copy_failed(1, 2, Error::invalid_argument("x")),
        ];
        for e in &all {
            match e {
                Error::LibraryNotFound { .. }
                | Error::MissingSymbol { .. }
                | Error::Vendor { .. }
                | Error::NoBackendStarted { .. }
                | Error::Config { .. }
                | Error::InvalidToken { .. }
                | Error::BackendMismatch { .. }
                | Error::Unsupported { .. }
                | Error::InvalidDevice { .. }
                | Error::DeviceNotVisible { .. }
                | Error::InvalidArgument { .. }
                | Error::UnknownHandle { .. }
                | Error::InheritedAcrossFork { .. }
                | Error::Timeout { .. }
                | Error::Io { .. }
                | Error::Copy { .. } => {}
            }
        }
        all
    }

    #[test]
    fn every_variant_has_its_own_row() {
        let kinds: Vec<ErrorKind> = one_of_each().iter().map(Error::error_kind).collect();
        assert_eq!(
            kinds,
            ErrorKind::ALL,
            "one row per variant, in variant order"
        );
        for e in one_of_each() {
            assert_eq!(e.kind(), e.error_kind().name());
            assert_eq!(e.kind_code(), e.error_kind().code());
        }
    }

    #[test]
    fn kind_names_are_what_they_were() {
        // `Error::kind()` before the table, byte for byte.
        let before = [
            "library_not_found",
            "missing_symbol",
            "vendor",
            "no_backend_started",
            "config",
            "invalid_token",
            "backend_mismatch",
            "unsupported",
            "invalid_device",
            "device_not_visible",
            "invalid_argument",
            "unknown_handle",
            "inherited_across_fork",
            "timeout",
            "io",
            "copy",
        ];
        let now: Vec<&str> = one_of_each().iter().map(Error::kind).collect();
        assert_eq!(now, before);
    }
}
