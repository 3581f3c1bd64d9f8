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
use std::io::{self, Read as _, Write as _};
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

/// Longest violations file [`read`] reads; the rest is ignored (records are short, and a
/// scenario records a handful).
pub const MAX_READ: u64 = 1 << 20;

/// Opens the violations file of `dir` without following a symlink and without blocking
/// on a FIFO, and refuses anything but a regular file (the directory is private, but a
/// planted entry must not hang or redirect the emulator).
fn open(dir: &EmuDir, options: &mut OpenOptions) -> Result<std::fs::File, EmuError> {
    let path = dir.join(VIOLATIONS);
    devipc_shm::private_dir::open_regular(&path, options).map_err(|e| {
        if e.kind() == std::io::ErrorKind::InvalidData {
            EmuError::Corrupt {
                path: path.clone(),
                reason: "the violations file is not a regular file".into(),
            }
        } else {
            EmuError::io("open", &path, e)
        }
    })
}

/// Appends a record of `rule` broken by this process on `object`, then says so on stderr
/// (where a test log shows it next to the failure it explains; a closed stderr does not
/// stop the record).
pub fn record(dir: &EmuDir, rule: &str, object: ObjectId, message: &str) -> Result<(), EmuError> {
    let violation = Violation {
        rule: rule.to_owned(),
        pid: std::process::id() as i32,
        object: object.to_string(),
        message: message.to_owned(),
    };
    let line = violation.encode();
    let mut file = open(
        dir,
        OpenOptions::new().append(true).create(true).mode(0o600),
    )?;
    let appended = file
        .write_all(format!("{line}\n").as_bytes())
        .map_err(|e| EmuError::io("append", dir.join(VIOLATIONS), e));
    let _ = writeln!(std::io::stderr(), "devipc-emulator: VIOLATION {line}");
    appended
}

/// Every violation recorded in `dir`, oldest first (none when there is no file); reads
/// at most [`MAX_READ`] bytes, and skips lines that are not records.
pub fn read(dir: &EmuDir) -> Result<Vec<Violation>, EmuError> {
    let file = match open(dir, OpenOptions::new().read(true)) {
        Ok(f) => f,
        Err(EmuError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
            return Ok(Vec::new());
        }
        Err(e) => return Err(e),
    };
    let mut bytes = Vec::new();
    file.take(MAX_READ)
        .read_to_end(&mut bytes)
        .map_err(|e| EmuError::io("read", dir.join(VIOLATIONS), e))?;
    Ok(String::from_utf8_lossy(&bytes)
        .lines()
        .filter_map(Violation::decode)
        .collect())
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

    #[test]
    #[allow(unsafe_code)]
    fn planted_entries_are_refused_not_followed_or_waited_on() {
        let path =
            std::env::temp_dir().join(format!("devipc-emu-viol-plant-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        let dir = EmuDir::open(&path).unwrap();
        let id = ObjectId::new(0x100, 1).unwrap();
        // A symlink pointing out of the directory.
        let outside = path.with_extension("outside");
        std::fs::write(&outside, "rule=planted pid=1 object=x no\n").unwrap();
        std::os::unix::fs::symlink(&outside, dir.join(VIOLATIONS)).unwrap();
        assert!(read(&dir).is_err());
        assert!(record(&dir, "hip.mem.free-while-opened", id, "x").is_err());
        assert_eq!(
            std::fs::read_to_string(&outside).unwrap(),
            "rule=planted pid=1 object=x no\n"
        );
        std::fs::remove_file(dir.join(VIOLATIONS)).unwrap();
        std::fs::remove_file(&outside).unwrap();
        // A FIFO: refused at once, not waited on.
        let fifo =
            std::ffi::CString::new(dir.join(VIOLATIONS).into_os_string().into_encoded_bytes())
                .unwrap();
        // SAFETY: a valid NUL-terminated path; mkfifo has no other preconditions.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        assert!(read(&dir).is_err());
        assert!(record(&dir, "hip.mem.free-while-opened", id, "x").is_err());
        std::fs::remove_file(dir.join(VIOLATIONS)).unwrap();
        // Garbage and non-UTF-8 lines are skipped, records still read.
        std::fs::write(
            dir.join(VIOLATIONS),
            b"\xff\xfe garbage\nrule=a.b pid=7 object=o m\n".as_slice(),
        )
        .unwrap();
        let got = read(&dir).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!((got[0].rule.as_str(), got[0].pid), ("a.b", 7));
        dir.remove_all().unwrap();
    }
}
