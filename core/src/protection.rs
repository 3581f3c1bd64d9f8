//! devipc's own lifetime protections, and a test-only way to switch one off.
//!
//! devipc adds protections the vendors do not have: on HIP the exporter's free waits for
//! the importers' closes (a crash-safe lease), on Ascend IPC keys the exporter's close is
//! refused while an importer still maps the block, the import cache closes a shared
//! vendor import only when its last user drops it, and a request keeps the memory of its
//! copies until they completed. The conformance suite shows that each
//! one is what keeps its scenario safe by running the scenario with the protection
//! switched off ([`BREAK_ENV`]` = <name>`) on the strict emulator, which then records the
//! vendor violation or fails the copy that reads freed memory.
//!
//! The switch exists only with the cargo feature `fault-injection` (the conformance suite
//! enables it); without the feature [`enabled`] is a constant `true` and nothing reads the
//! environment, so a production build cannot be weakened by a variable.

use std::fmt;

/// Names the protection to switch off: `DEVIPC_BREAK_PROTECTION=<name>` (feature
/// `fault-injection` only).
pub const BREAK_ENV: &str = "DEVIPC_BREAK_PROTECTION";

/// One of devipc's own protections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protection {
    /// HIP: `free` of exported memory waits until every importer closed it (the lease).
    HipDeferredFree,
    /// Ascend IPC keys: `close_external` is refused while an importer maps the block.
    AscendKeyCloseOrder,
    /// The import cache closes a shared vendor import when its last user drops it.
    ImportCacheRefcount,
    /// A request keeps the memory its copies name (allocations, imports) until they
    /// completed, so a close or free meanwhile waits for them.
    RequestKeepsMemory,
}

impl Protection {
    /// Every protection.
    pub const ALL: [Protection; 4] = [
        Protection::HipDeferredFree,
        Protection::AscendKeyCloseOrder,
        Protection::ImportCacheRefcount,
        Protection::RequestKeepsMemory,
    ];

    /// The name [`BREAK_ENV`] takes.
    pub const fn name(self) -> &'static str {
        match self {
            Protection::HipDeferredFree => "hip-deferred-free",
            Protection::AscendKeyCloseOrder => "ascend-key-close-order",
            Protection::ImportCacheRefcount => "import-cache-refcount",
            Protection::RequestKeepsMemory => "request-keeps-memory",
        }
    }
}

impl fmt::Display for Protection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Whether `protection` is on: always, unless this build has the `fault-injection`
/// feature and [`BREAK_ENV`] names it (read once per process).
#[cfg(feature = "fault-injection")]
// Every build has `enabled` (without the feature, the one below): no feature badge.
#[cfg_attr(docsrs, doc(auto_cfg = false))]
pub fn enabled(protection: Protection) -> bool {
    static BROKEN: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let broken = BROKEN.get_or_init(|| {
        let value = std::env::var(BREAK_ENV).ok().filter(|v| !v.is_empty())?;
        if !Protection::ALL.iter().any(|p| p.name() == value) {
            // A misspelt name would break nothing and look like a passing mutation. Straight
            // to stderr, not `log`: this is a test harness's misconfiguration, shown to the
            // person running it, who has no logger installed.
            let known: Vec<&str> = Protection::ALL.iter().map(|p| p.name()).collect();
            eprintln!(
                "devipc: {BREAK_ENV}={value:?} names no protection (known: {}); every \
                 protection stays on",
                known.join(", ")
            );
        }
        Some(value)
    });
    broken.as_deref() != Some(protection.name())
}

/// Whether `protection` is on: always, in a build without the `fault-injection` feature.
#[cfg(not(feature = "fault-injection"))]
pub const fn enabled(_protection: Protection) -> bool {
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_distinct_and_kebab_case() {
        let mut names: Vec<&str> = Protection::ALL.iter().map(|p| p.name()).collect();
        assert!(
            names
                .iter()
                .all(|n| n.chars().all(|c| c.is_ascii_lowercase() || c == '-'))
        );
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Protection::ALL.len());
    }

    /// Without the variable every protection is on (the test process does not set it).
    #[test]
    fn protections_are_on_by_default() {
        if std::env::var_os(BREAK_ENV).is_none() {
            assert!(Protection::ALL.into_iter().all(enabled));
        }
    }
}
