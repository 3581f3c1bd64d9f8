//! Which host and pid namespace a process lives in.
//!
//! Identical pids exist in different containers, so a token records its producer as
//! (pid, pid-namespace inode, boot-id hash). Two processes can share device memory only
//! when they run on the same booted host; the pid namespace tells whether a pid seen in a
//! token means the same process to the receiver.

use std::path::Path;

/// The host boot and pid namespace of the current process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct HostIdentity {
    /// Inode of `/proc/self/ns/pid`; 0 when unknown.
    pub pid_namespace: u64,
    /// FNV-1a hash of `/proc/sys/kernel/random/boot_id`; 0 when unknown.
    pub boot_id_hash: u64,
}

impl HostIdentity {
    /// Reads the identity of the current process from `/proc`. Fields that cannot be read
    /// (no procfs) are 0, which [`HostIdentity::other_host`] treats as "unknown".
    pub fn current() -> Self {
        HostIdentity {
            pid_namespace: pid_namespace_inode(Path::new("/proc/self/ns/pid")).unwrap_or(0),
            boot_id_hash: std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
                .map(|s| fnv1a64(s.trim().as_bytes()))
                .unwrap_or(0),
        }
    }

    /// Whether `other` is known to be a different booted host. Unknown (0) never counts as
    /// different.
    pub fn other_host(&self, other: &HostIdentity) -> bool {
        self.boot_id_hash != 0 && other.boot_id_hash != 0 && self.boot_id_hash != other.boot_id_hash
    }

    /// Whether both are on the same host and pid namespace, so pids mean the same process.
    pub fn same_pid_namespace(&self, other: &HostIdentity) -> bool {
        !self.other_host(other)
            && self.pid_namespace != 0
            && self.pid_namespace == other.pid_namespace
    }
}

/// The calling process's start time (field 22 of `/proc/self/stat`, clock ticks since
/// boot), 0 when it cannot be read. Fields are counted from the last `)`, since the
/// command name in field 2 may contain spaces and parentheses.
pub fn current_start_time() -> u64 {
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|line| start_time_of_stat(&line))
        .unwrap_or(0)
}

/// Field 22 of a `/proc/<pid>/stat` line.
fn start_time_of_stat(line: &str) -> Option<u64> {
    let after_comm = &line[line.rfind(')')? + 1..];
    // After ")" come fields 3, 4, ...: field 22 is at index 19.
    after_comm
        .split_ascii_whitespace()
        .nth(22 - 3)?
        .parse()
        .ok()
}

/// The inode number of a namespace link such as `pid:[4026531836]`.
fn pid_namespace_inode(link: &Path) -> Option<u64> {
    let target = std::fs::read_link(link).ok()?;
    let text = target.to_str()?;
    let inner = text.strip_prefix("pid:[")?.strip_suffix(']')?;
    inner.parse().ok()
}

/// 64-bit FNV-1a (a checksum, not a keyed hash).
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_current_identity_on_linux() {
        let me = HostIdentity::current();
        assert_ne!(
            me.pid_namespace, 0,
            "procfs should expose /proc/self/ns/pid"
        );
        assert_ne!(me.boot_id_hash, 0, "procfs should expose the boot id");
        assert!(me.same_pid_namespace(&me));
        assert!(!me.other_host(&me));
    }

    #[test]
    fn compares_hosts_and_namespaces() {
        let a = HostIdentity {
            pid_namespace: 1,
            boot_id_hash: 10,
        };
        let other_ns = HostIdentity {
            pid_namespace: 2,
            boot_id_hash: 10,
        };
        let other_host = HostIdentity {
            pid_namespace: 1,
            boot_id_hash: 11,
        };
        let unknown = HostIdentity::default();
        assert!(!a.same_pid_namespace(&other_ns));
        assert!(!a.same_pid_namespace(&other_host));
        assert!(a.other_host(&other_host));
        assert!(!a.other_host(&unknown));
        assert!(!a.same_pid_namespace(&unknown));
    }

    #[test]
    fn start_time_is_field_22_counted_from_the_last_paren() {
        let line = "42 (a) b (c)) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 777 20";
        assert_eq!(start_time_of_stat(line), Some(777));
        assert_eq!(start_time_of_stat("42 (x) S 1"), None);
        assert_ne!(current_start_time(), 0, "procfs exposes /proc/self/stat");
    }

    #[test]
    fn fnv_known_vector() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
