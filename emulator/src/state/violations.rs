//! Violation records: where real hardware would corrupt memory or fault silently, the
//! emulator writes down what happened.
//!
//! When a vendor's release point passes while another process still maps the memory (HIP:
//! the exporter's `hipFree` with importers; Ascend: the exporter destroying an IPC key, or
//! freeing its block, while importers map it), the vendor's behaviour is undefined. The
//! emulator then revokes the pages ([`super::Registry::revoke`]) and appends one line to
//! `<state dir>/violations`:
//!
//! ```text
//! rule=<rule id> pid=<pid of the violating process> object=<object id> <what happened>
//! ```
//!
//! A state directory with no violation has no such file, so a test (or the conformance
//! runner) that checks the directory is left with nothing but the `ledger` also checks
//! that no violation happened; [`read`] gives the records to a test that expects one.
//! Lines are appended with one `write` on an `O_APPEND` file, so records of concurrent
//! processes do not interleave.

use std::fs::OpenOptions;
use std::io::{self, Write as _};
use std::os::unix::fs::OpenOptionsExt;

use super::dir::EmuDir;
use super::ids::ObjectId;
use crate::error::EmuError;

/// Name of the violations file in the state directory.
pub const VIOLATIONS: &str = "violations";

/// One recorded violation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The vendor rule that was broken, e.g. `hip.mem.free-while-opened`.
    pub rule: String,
    /// The process that broke it.
    pub pid: i32,
    /// The object it concerns (16 hex digits).
    pub object: String,
    /// What happened, for humans.
    pub message: String,
}

impl Violation {
    /// The record's line (without the newline).
    pub fn encode(&self) -> String {
        format!(
            "rule={} pid={} object={} {}",
            self.rule,
            self.pid,
            self.object,
            self.message.replace('\n', " ")
        )
    }

    /// Parses a line written by [`Violation::encode`].
    pub fn decode(line: &str) -> Option<Violation> {
        let mut fields = line.splitn(4, ' ');
        let rule = fields.next()?.strip_prefix("rule=")?.to_owned();
        let pid = fields.next()?.strip_prefix("pid=")?.parse().ok()?;
        let object = fields.next()?.strip_prefix("object=")?.to_owned();
        let message = fields.next().unwrap_or_default().to_owned();
        Some(Violation {
            rule,
            pid,
            object,
            message,
        })
    }
}

/// Appends a record of `rule` broken by this process on `object`, and says so on stderr
/// (where a test log shows it next to the failure it explains).
pub fn record(dir: &EmuDir, rule: &str, object: ObjectId, message: &str) -> Result<(), EmuError> {
    let violation = Violation {
        rule: rule.to_owned(),
        pid: std::process::id() as i32,
        object: object.to_string(),
        message: message.to_owned(),
    };
    let line = violation.encode();
    eprintln!("devipc-emulator: VIOLATION {line}");
    let path = dir.join(VIOLATIONS);
    let mut file = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&path)
        .map_err(|e| EmuError::io("open", &path, e))?;
    file.write_all(format!("{line}\n").as_bytes())
        .map_err(|e| EmuError::io("append", &path, e))
}

/// Every violation recorded in `dir`, oldest first (none when there is no file).
pub fn read(dir: &EmuDir) -> Result<Vec<Violation>, EmuError> {
    let path = dir.join(VIOLATIONS);
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok(text.lines().filter_map(Violation::decode).collect()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(EmuError::io("read", &path, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_accumulate() {
        let path = std::env::temp_dir().join(format!("devipc-emu-viol-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        let dir = EmuDir::open(&path).unwrap();
        assert_eq!(read(&dir).unwrap(), []);
        let id = ObjectId::new(0x100, 42).unwrap();
        record(&dir, "hip.mem.free-while-opened", id, "freed\nwhile opened").unwrap();
        record(&dir, "ascend.ipc-key.importers-close-first", id, "").unwrap();
        let got = read(&dir).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].rule, "hip.mem.free-while-opened");
        assert_eq!(got[0].pid, std::process::id() as i32);
        assert_eq!(got[0].object, id.to_string());
        assert_eq!(got[0].message, "freed while opened");
        assert_eq!(got[1].rule, "ascend.ipc-key.importers-close-first");
        assert_eq!(got[1].message, "");
        dir.remove_all().unwrap();
    }
}
