//! Loud skips: a test whose dependency is missing here says so and passes, unless
//! [`NO_SKIP_ENV`]` = 1` (CI, which installs every dependency it can) makes it fail.
//!
//! libtest captures `eprintln!` of passing tests, so a skip reported that way is silent.
//! [`skip`] writes to the process's stderr handle directly, past the capture, in a banner
//! that starts with `SKIPPED` so a log can be searched (and CI counts them).

use std::io::Write;

/// `1` turns every [`skip`] into a failure (CI sets it).
pub const NO_SKIP_ENV: &str = "DEVIPC_NO_SKIP";

/// Whether skipping is forbidden in this run ([`NO_SKIP_ENV`]` = 1`).
pub fn skips_forbidden() -> bool {
    std::env::var_os(NO_SKIP_ENV).is_some_and(|v| v == "1")
}

/// Reports that `test` cannot run (all of it, or the part named) because of `reason`,
/// which says what is missing and how to get it: prints a banner to the real stderr and
/// returns, so the caller returns too. Panics instead when [`skips_forbidden`].
#[track_caller]
pub fn skip(test: &str, reason: &str) {
    if skips_forbidden() {
        panic!("{NO_SKIP_ENV}=1 forbids skipping: {test} cannot run here: {reason}");
    }
    let _ = std::io::stderr().write_all(banner(test, reason).as_bytes());
}

/// Why one test child cannot take another's file descriptors with `pidfd_getfd`, if it
/// cannot: Yama's `kernel.yama.ptrace_scope` 1 or 2 allows ptrace access only to
/// descendants (or to root, with `CAP_SYS_PTRACE`), 3 to nobody; sibling children of a
/// test are not each other's descendants. `None` when the kernel allows it (no Yama, or
/// scope 0).
pub fn sibling_pidfd_getfd_refused() -> Option<String> {
    let scope = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope").ok()?;
    let scope: u32 = scope.trim().parse().ok()?;
    // The effective uid: the second field of `Uid:` in /proc/self/status.
    let root = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let line = status.lines().find(|l| l.starts_with("Uid:"))?;
            line.split_whitespace().nth(2).map(|euid| euid == "0")
        })
        .unwrap_or(false);
    match scope {
        0 => None,
        1 | 2 if root => None,
        _ => Some(format!(
            "kernel.yama.ptrace_scope is {scope}: sibling processes may not pidfd_getfd each \
             other's descriptors (run as root, or `sysctl kernel.yama.ptrace_scope=0`)"
        )),
    }
}

/// The text [`skip`] prints.
fn banner(test: &str, reason: &str) -> String {
    let rule = "*".repeat(78);
    format!("\n{rule}\nSKIPPED {test}: {reason}\n{rule}\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_banner_names_the_test_and_the_reason_on_one_searchable_line() {
        let text = banner("doctor: real HIP", "libamdhip64 not installed");
        let line = text
            .lines()
            .find(|l| l.starts_with("SKIPPED"))
            .expect("a SKIPPED line");
        assert_eq!(line, "SKIPPED doctor: real HIP: libamdhip64 not installed");
    }
}
