//! Export records: what the exporter says about a vendor object it shares, where an
//! importer can check it, so that an import trusts the exporter rather than the token.
//!
//! A token is not a secret and its CRC is not a signature: anyone who saw one can
//! re-encode it with a larger range, another generation, or after the exporter freed the
//! memory. ACL offers no query that tells an importer the size of what a shareable handle
//! or an IPC key names before it maps it (`aclrtMemGetAllocationPropertiesFromHandle`
//! reports the kind of memory, not its size; `aclrtMemGetAddressRange` needs a mapped
//! address, and the vendor documents it for `aclrtMalloc` and VMM addresses only), and no
//! way to tell a live export from a replayed one whose vendor name was reused. So each
//! exporter writes, for every vendor object it exports, a small record in devipc's
//! runtime directory (a private 0700 directory of the user: nobody else can write
//! there), named after the vendor object itself:
//!
//! - `ascend-vmm-<16 hex>-<pid>-<start>`: a VMM shareable handle (the `u64` the runtime
//!   returned);
//! - `ascend-key-<hex>-<pid>-<start>`: an IPC memory key, by its bytes up to the NUL (what
//!   the runtime reads: bytes after the NUL in a token cannot name another record);
//!
//! where `<pid>-<start>` is the exporter as its tokens name it ([`Exporter`]).
//!
//! A record holds the exporter's identity (pid, start time and pid namespace), the
//! export's generation,
//! the object's real size and its device. The importer reads the record of the object the
//! token names (a forged token can name only an object whose record exists, and then gets
//! that record's size and generation, not its own claims) and refuses a token whose
//! generation, device or size does not match, or whose record is missing (the exporter
//! freed or closed the object: replay after free) or was left by an exporter that is dead
//! (an exporter of another pid namespace, in a container sharing the directory, is judged
//! by its [liveness beacon](devipc_shm::liveness), never by a pid lookup here). A record
//! without the namespace (written before it was recorded) is read as one of the reader's
//! namespace.
//! The exporter withdraws the record before it releases the object, so a replayed token
//! stops importing at the moment the release starts.
//!
//! Records are written to a temporary file and renamed into place, so a reader sees a
//! whole record or none; a later export of a reused vendor name replaces it. A process's
//! vendor objects die with it (the driver destroys its keys and frees its memory), and so
//! do its records: those still in place when it exits normally are removed by an
//! `atexit` handler (a record's name holds its exporter's identity, so they are the
//! process's own), and those of a process that crashed are swept by the next process that
//! publishes one (once per process), or removed by the first reader that finds their
//! exporter dead.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::io::{self, Read, Write as _};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::Once;

use devipc_core::fork::{PerProcess, forget_inherited};
use devipc_core::{DeviceId, Error, Result, TokenOrigin};
use devipc_shm::private_dir::{RUNTIME_DIR_ENV, runtime_dir_for_devipc, sweep};
use devipc_shm::process::ProcessIdentity;
use devipc_shm::word_file::NAME_LEN as LEASE_NAME_LEN;

/// Prefix of every record file name.
const PREFIX: &str = "ascend-";
/// Largest record read (a record is a few short lines).
const MAX_LEN: u64 = 4096;

/// The vendor object a record describes, as exported by one process.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Object<'a> {
    /// A VMM shareable handle.
    Vmm(u64, Exporter),
    /// An IPC memory key (65-byte buffer holding a NUL).
    Key(&'a [u8], Exporter),
}

/// The exporting process as its tokens name it ([`TokenOrigin`]'s pid and start time).
///
/// Part of a record's name: vendor names are unique on a node, but each emulator state
/// directory is a node of its own, and processes of different state directories may
/// share one runtime directory (tests do). A token naming another origin names no record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Exporter {
    pid: u32,
    start_time: u64,
}

impl From<TokenOrigin> for Exporter {
    fn from(origin: TokenOrigin) -> Exporter {
        Exporter {
            pid: origin.pid.0,
            start_time: origin.start_time,
        }
    }
}

impl Object<'_> {
    /// The record's file name (without the directory).
    fn file_name(&self) -> String {
        let (mut name, by) = match self {
            Object::Vmm(handle, by) => (format!("{PREFIX}vmm-{handle:016x}"), by),
            Object::Key(key, by) => {
                let end = key.iter().position(|&b| b == 0).unwrap_or(key.len());
                let mut name = format!("{PREFIX}key-");
                for b in &key[..end] {
                    let _ = write!(name, "{b:02x}");
                }
                (name, by)
            }
        };
        let _ = write!(name, "-{}-{}", by.pid, by.start_time);
        name
    }

    /// How an error message names the object.
    fn describe(&self) -> &'static str {
        match self {
            Object::Vmm(..) => "VMM shareable handle",
            Object::Key(..) => "IPC memory key",
        }
    }
}

/// What an exporter records about one exported vendor object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ExportRecord {
    /// The exporting process.
    pub(crate) exporter: ProcessIdentity,
    /// The generation the exporter put in the object's tokens.
    pub(crate) generation: u64,
    /// The object's real size in bytes (the physical allocation, or the key's range).
    pub(crate) size: u64,
    /// The device the object lives on.
    pub(crate) device: DeviceId,
    /// The lease importers of the object hold (IPC keys): the importer holds the lease
    /// the record names, never one a token names, so a token stripped of its lease
    /// cannot import unseen by the exporter's close.
    pub(crate) lease: Option<LeaseName>,
    /// The exporter let go of the object while importers still mapped it (a dropped
    /// backend leaves such a key open until the process exits): nobody imports it any
    /// more, but the vendor would still let them, so the record stays to say no.
    pub(crate) retired: bool,
}

/// The name of a devipc lease.
pub(crate) type LeaseName = [u8; LEASE_NAME_LEN];

impl ExportRecord {
    /// A record of the calling process.
    pub(crate) fn mine(
        generation: u64,
        size: usize,
        device: DeviceId,
        lease: Option<LeaseName>,
    ) -> Result<ExportRecord> {
        Ok(ExportRecord {
            exporter: ProcessIdentity::current()
                .map_err(|e| Error::io("reading /proc/self/stat", e))?,
            generation,
            size: size as u64,
            device,
            lease,
            retired: false,
        })
    }

    fn encode(&self) -> String {
        let mut out = format!(
            "exporter {} {} {}\ngeneration {}\nsize {}\ndevice {}\n",
            self.exporter.pid,
            self.exporter.start_time,
            self.exporter.pid_ns,
            self.generation,
            self.size,
            self.device.0
        );
        if let Some(lease) = &self.lease {
            out.push_str("lease ");
            for b in lease {
                let _ = write!(out, "{b:02x}");
            }
            out.push('\n');
        }
        if self.retired {
            out.push_str("retired\n");
        }
        out
    }

    fn decode(text: &str) -> Option<ExportRecord> {
        let mut lines = text.lines();
        let mut field = |name: &str| -> Option<Vec<u64>> {
            let rest = lines.next()?.strip_prefix(name)?.strip_prefix(' ')?;
            rest.split(' ').map(|v| v.parse().ok()).collect()
        };
        let exporter = field("exporter")?;
        let generation = field("generation")?;
        let size = field("size")?;
        let device = field("device")?;
        let mut lease = None;
        let mut retired = false;
        for line in lines {
            if let Some(hex) = line.strip_prefix("lease ") {
                lease = Some(parse_hex(hex)?);
            } else if line == "retired" {
                retired = true;
            } else {
                return None;
            }
        }
        let (pid, start, pid_ns) = match exporter[..] {
            [pid, start, ns] => (pid, start, u32::try_from(ns).ok()?),
            // Written before the pid namespace was recorded: one of ours, as it meant.
            [pid, start] => (pid, start, ProcessIdentity::current_pid_ns()),
            _ => return None,
        };
        match (&generation[..], &size[..], &device[..]) {
            ([generation], [size], [device]) => Some(ExportRecord {
                exporter: ProcessIdentity {
                    pid: i32::try_from(pid).ok()?,
                    start_time: start,
                    pid_ns,
                },
                generation: *generation,
                size: *size,
                device: DeviceId(u32::try_from(*device).ok()?),
                lease,
                retired,
            }),
            _ => None,
        }
    }
}

/// A lease name written as hex.
fn parse_hex(hex: &str) -> Option<LeaseName> {
    let mut out = [0u8; LEASE_NAME_LEN];
    if hex.len() != 2 * LEASE_NAME_LEN {
        return None;
    }
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

fn io_error(what: &str, e: io::Error) -> Error {
    Error::io(
        format!("{what} (a devipc export record in {RUNTIME_DIR_ENV})"),
        e,
    )
}

fn path_of(object: Object<'_>) -> Result<PathBuf> {
    Ok(runtime_dir_for_devipc()?.join(object.file_name()))
}

/// The records this process published and has not withdrawn, removed at exit.
static PUBLISHED: PerProcess<BTreeSet<PathBuf>> = PerProcess::new(forget_inherited);

/// The process that registered the `atexit` handler: a forked child inherits the handler
/// and `PUBLISHED`, but the records are its parent's, which still exports them.
static PUBLISHER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// The `atexit` handler: removes the process's remaining records. Never blocks: if
/// another thread holds the set while the process exits, the records are left to the
/// sweep. Does nothing in a forked child.
extern "C" fn remove_published_at_exit() {
    if PUBLISHER.load(std::sync::atomic::Ordering::SeqCst) != std::process::id() {
        return;
    }
    if let Some(mut paths) = PUBLISHED.try_lock() {
        for path in std::mem::take(&mut *paths) {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Writes (or replaces) the record of `object`.
pub(crate) fn publish(object: Object<'_>, record: &ExportRecord) -> Result<()> {
    static SWEPT: Once = Once::new();
    static AT_EXIT: Once = Once::new();
    let dir = runtime_dir_for_devipc()?;
    SWEPT.call_once(|| sweep_dead(&dir));
    // Before the record names this process: readers of other pid namespaces judge it by
    // its beacon.
    devipc_shm::liveness::announce(&dir).map_err(|e| io_error("announcing this process", e))?;
    AT_EXIT.call_once(|| {
        PUBLISHER.store(std::process::id(), std::sync::atomic::Ordering::SeqCst);
        // SAFETY: registers a plain `extern "C" fn()` that touches only a static; a
        // failure to register (non-zero) leaves the records to the sweep.
        let _ = unsafe { libc::atexit(remove_published_at_exit) };
    });
    // A forked child inherits the handler and its parent's set: its first record makes
    // the set its own.
    if PUBLISHER.swap(std::process::id(), std::sync::atomic::Ordering::SeqCst) != std::process::id()
    {
        PUBLISHED.lock().clear();
    }
    let path = dir.join(object.file_name());
    let me = record.exporter;
    let tmp = dir.join(format!(
        ".{}.{}-{}.tmp",
        object.file_name(),
        me.pid,
        me.start_time
    ));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| f.write_all(record.encode().as_bytes()))
        .and_then(|()| std::fs::rename(&tmp, &path));
    match written {
        Ok(()) => {
            PUBLISHED.lock().insert(path);
            Ok(())
        }
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(io_error("writing", e))
        }
    }
}

/// The live record of `object`: `Ok(None)` when there is none, or when the process that
/// wrote it is dead (then the record is removed: a dead exporter's objects are gone).
pub(crate) fn read(object: Object<'_>) -> Result<Option<ExportRecord>> {
    let path = path_of(object)?;
    let mut text = String::new();
    match devipc_shm::private_dir::open_regular_file(&path) {
        Ok(f) => f
            .take(MAX_LEN)
            .read_to_string(&mut text)
            .map_err(|e| io_error("reading", e))?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_error("opening", e)),
    };
    let record = ExportRecord::decode(&text).ok_or_else(|| {
        Error::invalid_argument(format!("the export record {} is malformed", path.display()))
    })?;
    if !record.exporter.is_alive_in(path.parent().unwrap_or(&path)) {
        let _ = std::fs::remove_file(&path);
        return Ok(None);
    }
    Ok(Some(record))
}

/// Removes the record of `object` if it is still the one `generation` of this process
/// wrote (a reused vendor name may since carry another exporter's record). Failures are
/// logged (`log::warn!`): this runs on release paths, and a record left behind names an object
/// whose import the runtime refuses anyway.
pub(crate) fn withdraw(object: Object<'_>, generation: u64) {
    let ours = match (read(object), ProcessIdentity::current()) {
        (Ok(Some(r)), Ok(me)) => r.exporter == me && r.generation == generation,
        (Ok(None), _) => false,
        (Err(e), _) => {
            log::warn!("devipc-ascend: reading an export record to withdraw it failed: {e}");
            false
        }
        (_, Err(e)) => {
            log::warn!("devipc-ascend: reading /proc/self/stat failed: {e}");
            false
        }
    };
    if !ours {
        return;
    }
    let removed = path_of(object).map(|path| {
        PUBLISHED.lock().remove(&path);
        std::fs::remove_file(path)
    });
    match removed {
        Ok(Ok(())) => {}
        Ok(Err(e)) if e.kind() == io::ErrorKind::NotFound => {}
        Ok(Err(e)) => log::warn!(
            "devipc-ascend: {}",
            io_error("withdrawing an export record", e)
        ),
        Err(e) => log::warn!("devipc-ascend: withdrawing an export record failed: {e}"),
    }
}

/// Marks the record of `object` retired (see [`ExportRecord::retired`]) if it is still
/// the one `generation` of this process wrote. Failures are logged, as for
/// [`withdraw`].
pub(crate) fn retire(object: Object<'_>, generation: u64) {
    let me = ProcessIdentity::current().ok();
    match read(object) {
        Ok(Some(mut r)) if Some(r.exporter) == me && r.generation == generation => {
            r.retired = true;
            if let Err(e) = publish(object, &r) {
                log::warn!("devipc-ascend: retiring an export record failed: {e}");
            }
        }
        Ok(_) => {}
        Err(e) => log::warn!("devipc-ascend: retiring an export record failed: {e}"),
    }
}

/// Checks a token's claims against the record of the object it names, and returns the
/// real size (the record's). `record` is what [`read`] found for `object`.
pub(crate) fn verify(
    object: Object<'_>,
    record: Option<ExportRecord>,
    generation: u64,
    device: DeviceId,
    claimed_size: u64,
) -> Result<usize> {
    let Some(record) = record.filter(|r| !r.retired) else {
        return Err(Error::invalid_argument(format!(
            "the exporter already freed or closed this memory: no live export of the {} \
             (the exporter released it or exited, or it runs with another {RUNTIME_DIR_ENV})",
            object.describe()
        )));
    };
    if record.generation != generation {
        return Err(Error::invalid_token(format!(
            "generation {generation} is not the exported {}'s ({}): a stale or relabelled \
             token",
            object.describe(),
            record.generation
        )));
    }
    if record.device != device {
        return Err(Error::invalid_token(format!(
            "the token names device {device}, the exported {} is on device {}",
            object.describe(),
            record.device
        )));
    }
    if record.size != claimed_size {
        return Err(Error::invalid_token(format!(
            "the token claims an object of {claimed_size} bytes, the exported {} is {} bytes",
            object.describe(),
            record.size
        )));
    }
    usize::try_from(record.size).map_err(|_| {
        Error::invalid_token(format!(
            "object size {} does not fit this platform",
            record.size
        ))
    })
}

/// Removes the records of exporters that are dead (what a crashed exporter left).
fn sweep_dead(dir: &std::path::Path) {
    let _ = sweep(dir, PREFIX, |name| {
        let path = dir.join(format!("{PREFIX}{name}"));
        let mut text = String::new();
        devipc_shm::private_dir::open_regular_file(&path)?
            .take(MAX_LEN)
            .read_to_string(&mut text)?;
        match ExportRecord::decode(&text) {
            Some(r) if !r.exporter.is_alive_in(dir) => std::fs::remove_file(&path).map(|()| true),
            _ => Ok(false),
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_reject_garbage() {
        let r = ExportRecord {
            exporter: ProcessIdentity {
                pid: 42,
                start_time: 7,
                pid_ns: 4026531836,
            },
            generation: 9,
            size: 2 << 20,
            device: DeviceId(1),
            lease: None,
            retired: false,
        };
        assert_eq!(ExportRecord::decode(&r.encode()), Some(r));
        let keyed = ExportRecord {
            lease: Some([0xa5; LEASE_NAME_LEN]),
            retired: true,
            ..r
        };
        assert_eq!(ExportRecord::decode(&keyed.encode()), Some(keyed));
        let trailing = format!("{}what\n", r.encode());
        let short_lease = format!("{}lease abcd\n", r.encode());
        // Written before the pid namespace was recorded: one of the reader's namespace.
        let old = r
            .encode()
            .replace("exporter 42 7 4026531836", "exporter 42 7");
        let read = ExportRecord::decode(&old).unwrap();
        assert_eq!(read.exporter.pid_ns, ProcessIdentity::current_pid_ns());
        for bad in [
            "",
            "exporter 1\n",
            "exporter 1 2 3 4\ngeneration 1\nsize 1\ndevice 0\n",
            "exporter 1 2 99999999999\ngeneration 1\nsize 1\ndevice 0\n",
            "generation 1\nexporter 1 2\n",
            "x",
            &trailing,
            &short_lease,
        ] {
            assert_eq!(ExportRecord::decode(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_key_record_is_named_by_the_bytes_the_runtime_reads() {
        let by = Exporter {
            pid: 5,
            start_time: 6,
        };
        let mut a = [0u8; 65];
        a[..3].copy_from_slice(b"abc");
        let mut b = a;
        b[10] = 0xff; // after the NUL: the runtime never reads it
        assert_eq!(Object::Key(&a, by).file_name(), "ascend-key-616263-5-6");
        assert_eq!(
            Object::Key(&a, by).file_name(),
            Object::Key(&b, by).file_name()
        );
        assert_eq!(
            Object::Vmm(0x77, by).file_name(),
            "ascend-vmm-0000000000000077-5-6"
        );
    }
}
