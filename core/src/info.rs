//! What a backend is and can do: [`BackendInfo`], [`Capabilities`], [`RuntimeVersion`].
//!
//! Backends fill these once when they start; the facade, `devipc doctor` and the
//! conformance runner read them to decide what to call and which rules apply.

use std::fmt;
use std::path::PathBuf;

use crate::backend_kind::BackendKind;

/// Where a backend's vendor functions come from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LibrarySource {
    /// Loaded at run time with the dynamic loader from this path (or bare soname).
    Loaded(PathBuf),
    /// Linked at build time (HIP feature `link`).
    Linked,
    /// The devipc emulator linked into this process: host shared memory, no device.
    Emulated,
}

impl LibrarySource {
    /// Whether this is the in-process emulator.
    pub fn is_emulated(&self) -> bool {
        matches!(self, LibrarySource::Emulated)
    }
}

impl fmt::Display for LibrarySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LibrarySource::Loaded(p) => write!(f, "{}", p.display()),
            LibrarySource::Linked => f.write_str("linked at build time"),
            LibrarySource::Emulated => f.write_str("emulated"),
        }
    }
}

/// A vendor runtime version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct RuntimeVersion {
    /// Major version (HIP 6, ACL 1).
    pub major: u32,
    /// Minor version.
    pub minor: u32,
    /// Patch (HIP: the build number part of `HIP_VERSION`).
    pub patch: u32,
}

impl RuntimeVersion {
    /// A version from its parts.
    pub const fn new(major: u32, minor: u32, patch: u32) -> Self {
        RuntimeVersion {
            major,
            minor,
            patch,
        }
    }

    /// Decodes HIP's `HIP_VERSION = major * 10_000_000 + minor * 100_000 + patch`, as
    /// written by `hipRuntimeGetVersion`. Negative values are not versions.
    pub fn from_hip_encoded(v: i32) -> Option<Self> {
        let v = u32::try_from(v).ok()?;
        Some(RuntimeVersion::new(
            v / 10_000_000,
            (v / 100_000) % 100,
            v % 100_000,
        ))
    }

    /// Parses a dotted version such as `8.5.0`, `6.2` or `7.0.RC1` (non-numeric tails of a
    /// part are ignored, missing parts are 0).
    pub fn parse_dotted(s: &str) -> Option<Self> {
        let mut parts = s.trim().split('.').map(|p| {
            let digits: String = p.chars().take_while(char::is_ascii_digit).collect();
            digits.parse::<u32>().ok()
        });
        let major = parts.next()??;
        let minor = parts.next().flatten().unwrap_or(0);
        let patch = parts.next().flatten().unwrap_or(0);
        Some(RuntimeVersion::new(major, minor, patch))
    }
}

impl fmt::Display for RuntimeVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// What a backend supports on this runtime. Read it instead of guessing from the kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub struct Capabilities {
    /// `grant` restricts who may import (Ascend trustlists). HIP has no access control:
    /// any process that holds a token may import.
    pub access_control: bool,
    /// `allocate` + `export` of backend-allocated memory works.
    pub export_allocation: bool,
    /// `export_external` of framework-allocated memory works.
    pub export_external: bool,
    /// Signals (`create_signal` and friends) work.
    pub signals: bool,
    /// Importing on a different device than the exporter's works (peer access).
    pub cross_device_import: bool,
    /// `ExportOptions::any_process()` is honoured.
    pub disable_pid_validation: bool,
    /// Virtual memory shared as a file descriptor works (HIP `hip-vmm-fd`: ROCm 6.2+ with
    /// the VMM functions): `allocate_with` that mechanism, and `export_external` of VMM
    /// memory.
    pub vmm_fd: bool,
    /// Virtual memory can be exported as a fabric handle (HIP 7 `hipMemHandleTypeFabric`:
    /// a 64-byte handle, no file descriptor to pass), probed at start by exporting one
    /// granule. devipc reports it; its tokens still use the fd (`hip-vmm-fd`).
    pub vmm_fabric: bool,
}

/// Identity and abilities of a started backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendInfo {
    /// Which vendor.
    pub kind: BackendKind,
    /// Where its functions come from.
    pub source: LibrarySource,
    /// The runtime's version, when it reports one.
    pub runtime_version: Option<RuntimeVersion>,
    /// What it supports.
    pub capabilities: Capabilities,
}

impl BackendInfo {
    /// Short human-readable description, e.g. `hip 6.2.0 (emulated)`.
    pub fn describe(&self) -> String {
        let version = self
            .runtime_version
            .map(|v| format!(" {v}"))
            .unwrap_or_default();
        format!("{}{} ({})", self.kind, version, self.source)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_hip_versions() {
        assert_eq!(
            RuntimeVersion::from_hip_encoded(50221153),
            Some(RuntimeVersion::new(5, 2, 21153))
        );
        assert_eq!(
            RuntimeVersion::from_hip_encoded(60200000),
            Some(RuntimeVersion::new(6, 2, 0))
        );
        assert_eq!(RuntimeVersion::from_hip_encoded(-1), None);
    }

    #[test]
    fn parses_dotted_versions() {
        assert_eq!(
            RuntimeVersion::parse_dotted("8.5.0"),
            Some(RuntimeVersion::new(8, 5, 0))
        );
        assert_eq!(
            RuntimeVersion::parse_dotted("6.2"),
            Some(RuntimeVersion::new(6, 2, 0))
        );
        assert_eq!(
            RuntimeVersion::parse_dotted("7.0.RC1"),
            Some(RuntimeVersion::new(7, 0, 0))
        );
        assert_eq!(RuntimeVersion::parse_dotted("x.1"), None);
        assert_eq!(RuntimeVersion::parse_dotted(""), None);
    }

    #[test]
    fn describes_itself() {
        let info = BackendInfo {
            kind: BackendKind::Hip,
            source: LibrarySource::Emulated,
            runtime_version: Some(RuntimeVersion::new(6, 2, 0)),
            capabilities: Capabilities::default(),
        };
        assert_eq!(info.describe(), "hip 6.2.0 (emulated)");
        assert!(info.source.is_emulated());
    }
}
