//! The metadata of one shared object and its on-disk text form (pure logic, no I/O).
//!
//! [`ObjectMeta`] is what `<id>.meta` in the state directory holds. The registry reads it
//! under the object's lock, lets a surface inspect and change it, and writes it back
//! atomically (temporary file + rename). Fields fixed at creation live in [`ObjectInfo`];
//! the mutable part is the flags, a surface-defined `aux` word, the pid trustlist and the
//! holder list (the lease model: who keeps the object alive, and how many times).
//!
//! The file format is line-based text so a state directory can be inspected with `cat`:
//!
//! ```text
//! devipc-emu-object 2
//! id 00ab12000000002a
//! vendor acl
//! kind memory
//! device 0
//! size 2097152
//! charged 2097152
//! segment 2097152
//! exporter 4242 1234567 4026531836
//! parent -
//! offset 0
//! flags 0x3
//! aux 0x0
//! trust 4343 4444
//! holder 4242 1234567 4026531836 1
//! holder 4343 1234999 4026532178 2
//! ```
//!
//! A process is written as pid, start time and pid namespace (processes of several pid
//! namespaces may share a state directory). Version 1 files (no namespace) are still read,
//! their processes as ones of the reader's namespace, which is what version 1 meant.
//!
//! Parsing is total: any input gives an [`ObjectMeta`] or a [`MetaParseError`]; each key
//! appears exactly once except the repeatable `trust` and `holder` lines, lists are bounded.

use std::fmt::{self, Write as _};

use super::ids::ObjectId;
use super::process::ProcessIdentity;
use crate::error::EmuError;

/// Largest number of pids on one object's trustlist.
pub const MAX_TRUSTLIST: usize = 4096;
/// Largest number of distinct holder processes of one object.
pub const MAX_HOLDERS: usize = 4096;
/// Largest metadata file the parser accepts, in bytes.
pub const MAX_META_BYTES: usize = 1 << 20;

const HEADER: &str = "devipc-emu-object 2";
/// The header of version 1, without pid namespaces.
const HEADER_V1: &str = "devipc-emu-object 1";

/// Which vendor surface created an object. A handle of one surface never resolves to an
/// object of the other (the mechanism confusion the token's mechanism tag guards against).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Vendor {
    /// The ACL (Ascend) surface.
    Acl,
    /// The HIP (AMD) surface.
    Hip,
}

impl Vendor {
    /// The name used in metadata files and key strings.
    pub fn name(self) -> &'static str {
        match self {
            Vendor::Acl => "acl",
            Vendor::Hip => "hip",
        }
    }

    /// Inverse of [`Vendor::name`].
    pub fn from_name(name: &str) -> Option<Vendor> {
        match name {
            "acl" => Some(Vendor::Acl),
            "hip" => Some(Vendor::Hip),
            _ => None,
        }
    }

    /// A one-byte code for binary handles.
    pub fn code(self) -> u8 {
        match self {
            Vendor::Acl => 1,
            Vendor::Hip => 2,
        }
    }

    /// Inverse of [`Vendor::code`].
    pub fn from_code(code: u8) -> Option<Vendor> {
        match code {
            1 => Some(Vendor::Acl),
            2 => Some(Vendor::Hip),
            _ => None,
        }
    }
}

impl fmt::Display for Vendor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a shared object is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ObjectKind {
    /// Device memory: a `<id>.seg` file of `size` bytes charged to `device`
    /// (`aclrtMalloc`, `aclrtMallocPhysical`, `hipMalloc`). Its id can itself be the
    /// exported name (Ascend shareable handle, HIP IPC memory handle).
    Memory,
    /// A separately managed name for (part of) a `Memory` object: `parent` is the memory
    /// object, `offset`/`size` the exported range (`aclrtIpcMemGetExportKey`).
    MemKey,
    /// A binary semaphore: a one-page `<id>.seg` whose word 0 is the notify word
    /// (`aclrtCreateNotify` and its export key).
    Notify,
    /// An inter-process event: a one-page `<id>.seg` of words the surface defines
    /// (`hipEventInterprocess`, `ACL_EVENT_IPC`).
    Event,
}

impl ObjectKind {
    /// The name used in metadata files and key strings.
    pub fn name(self) -> &'static str {
        match self {
            ObjectKind::Memory => "memory",
            ObjectKind::MemKey => "memkey",
            ObjectKind::Notify => "notify",
            ObjectKind::Event => "event",
        }
    }

    /// Inverse of [`ObjectKind::name`].
    pub fn from_name(name: &str) -> Option<ObjectKind> {
        match name {
            "memory" => Some(ObjectKind::Memory),
            "memkey" => Some(ObjectKind::MemKey),
            "notify" => Some(ObjectKind::Notify),
            "event" => Some(ObjectKind::Event),
            _ => None,
        }
    }

    /// A one-byte code for binary handles.
    pub fn code(self) -> u8 {
        match self {
            ObjectKind::Memory => 1,
            ObjectKind::MemKey => 2,
            ObjectKind::Notify => 3,
            ObjectKind::Event => 4,
        }
    }

    /// Inverse of [`ObjectKind::code`].
    pub fn from_code(code: u8) -> Option<ObjectKind> {
        match code {
            1 => Some(ObjectKind::Memory),
            2 => Some(ObjectKind::MemKey),
            3 => Some(ObjectKind::Notify),
            4 => Some(ObjectKind::Event),
            _ => None,
        }
    }
}

impl fmt::Display for ObjectKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Flag bits of an object. The low 32 bits are defined here; the high 32 bits
/// ([`ObjectFlags::SURFACE_MASK`]) are free for the surfaces (e.g. creation flags of a
/// notify or event).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ObjectFlags(pub u64);

impl ObjectFlags {
    /// Any process may import: the trustlist is not consulted
    /// (`ACL_RT_*_EXPORT_FLAG_DISABLE_PID_VALIDATION`).
    pub const PID_VALIDATION_DISABLED: ObjectFlags = ObjectFlags(1 << 0);
    /// A name for the object has been handed out (Ascend: one shareable handle per
    /// physical handle).
    pub const EXPORTED: ObjectFlags = ObjectFlags(1 << 1);
    /// The exporter closed the name: existing holders keep it, new imports are refused.
    pub const CLOSED: ObjectFlags = ObjectFlags(1 << 2);
    /// Its pages were revoked: released by its owner while others still mapped it
    /// ([`super::Registry::revoke`]).
    pub const REVOKED: ObjectFlags = ObjectFlags(1 << 3);
    /// Bits the surfaces may use freely.
    pub const SURFACE_MASK: u64 = 0xffff_ffff_0000_0000;

    /// Whether every bit of `other` is set.
    pub fn contains(self, other: ObjectFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// Sets the bits of `other`.
    pub fn insert(&mut self, other: ObjectFlags) {
        self.0 |= other.0;
    }

    /// Clears the bits of `other`.
    pub fn remove(&mut self, other: ObjectFlags) {
        self.0 &= !other.0;
    }
}

impl std::ops::BitOr for ObjectFlags {
    type Output = ObjectFlags;
    fn bitor(self, rhs: ObjectFlags) -> ObjectFlags {
        ObjectFlags(self.0 | rhs.0)
    }
}

/// One process keeping an object alive, with how many acquisitions it has not released
/// (e.g. importing the same key twice gives count 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Holder {
    /// The holding process.
    pub process: ProcessIdentity,
    /// Outstanding acquisitions, at least 1.
    pub count: u32,
}

/// The fields of an object fixed at creation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObjectInfo {
    /// The object's id (also its file names).
    pub id: ObjectId,
    /// The surface that created it.
    pub vendor: Vendor,
    /// What it is.
    pub kind: ObjectKind,
    /// The device it belongs to.
    pub device: u32,
    /// Size in bytes: the allocation size for `Memory`, the exported length for `MemKey`,
    /// 0 or a surface-chosen value otherwise.
    pub size: u64,
    /// Bytes charged to `device`'s memory accounting; released when the object is freed.
    pub charged: u64,
    /// Length of the `<id>.seg` file, 0 when the object has none.
    pub segment_len: u64,
    /// The creating (exporting) process.
    pub exporter: ProcessIdentity,
    /// For `MemKey`: the `Memory` object it names.
    pub parent: Option<ObjectId>,
    /// For `MemKey`: offset of the exported range in `parent`.
    pub offset: u64,
}

/// An object's metadata: fixed [`ObjectInfo`] plus the mutable flags, `aux`, trustlist
/// and holders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectMeta {
    info: ObjectInfo,
    /// Flag bits (see [`ObjectFlags`]).
    pub flags: ObjectFlags,
    /// A word the surface may use freely (e.g. creation flags, a sequence number).
    pub aux: u64,
    trustlist: Vec<i32>,
    holders: Vec<Holder>,
}

impl ObjectMeta {
    /// New metadata with `first_holder` holding once and an empty trustlist.
    pub fn new(
        info: ObjectInfo,
        flags: ObjectFlags,
        aux: u64,
        first_holder: ProcessIdentity,
    ) -> Self {
        ObjectMeta {
            info,
            flags,
            aux,
            trustlist: Vec::new(),
            holders: vec![Holder {
                process: first_holder,
                count: 1,
            }],
        }
    }

    /// The fields fixed at creation.
    pub fn info(&self) -> &ObjectInfo {
        &self.info
    }

    /// The object's id.
    pub fn id(&self) -> ObjectId {
        self.info.id
    }

    /// Checks that the object was made by `vendor` and is a `kind`:
    /// [`EmuError::WrongKind`] otherwise (e.g. a notify key passed where a memory key is
    /// expected, or a HIP handle given to the ACL surface).
    pub fn expect(&self, vendor: Vendor, kind: ObjectKind) -> Result<(), EmuError> {
        if self.info.vendor == vendor && self.info.kind == kind {
            return Ok(());
        }
        Err(EmuError::WrongKind {
            id: self.info.id,
            expected: kind,
            expected_vendor: vendor,
            found: self.info.kind,
            vendor: self.info.vendor,
        })
    }

    /// The pids allowed to import (in the order they were added, without duplicates).
    pub fn trustlist(&self) -> &[i32] {
        &self.trustlist
    }

    /// Adds pids to the trustlist (duplicates ignored). Fails without change if the list
    /// would exceed [`MAX_TRUSTLIST`].
    pub fn trust(&mut self, pids: &[i32]) -> Result<(), EmuError> {
        let mut next = self.trustlist.clone();
        for &pid in pids {
            if !next.contains(&pid) {
                next.push(pid);
            }
        }
        if next.len() > MAX_TRUSTLIST {
            return Err(EmuError::LimitExceeded {
                what: "trustlist entries",
                limit: MAX_TRUSTLIST,
            });
        }
        self.trustlist = next;
        Ok(())
    }

    /// Replaces the trustlist with `pids` (duplicates dropped). Fails without change if
    /// there are more than [`MAX_TRUSTLIST`] distinct pids.
    pub fn set_trustlist(&mut self, pids: &[i32]) -> Result<(), EmuError> {
        let old = std::mem::take(&mut self.trustlist);
        self.trust(pids).inspect_err(|_| self.trustlist = old)
    }

    /// Whether `pid` may import: pid validation is disabled, or `pid` is on the trustlist.
    pub fn is_trusted(&self, pid: i32) -> bool {
        self.flags.contains(ObjectFlags::PID_VALIDATION_DISABLED) || self.trustlist.contains(&pid)
    }

    /// The holders, in the order they first acquired.
    pub fn holders(&self) -> &[Holder] {
        &self.holders
    }

    /// How many acquisitions `who` holds (0 if none).
    pub fn hold_count(&self, who: ProcessIdentity) -> u32 {
        self.holders
            .iter()
            .find(|h| h.process == who)
            .map_or(0, |h| h.count)
    }

    /// Records one more acquisition by `who`; returns its new count.
    pub fn add_holder(&mut self, who: ProcessIdentity) -> Result<u32, EmuError> {
        if let Some(h) = self.holders.iter_mut().find(|h| h.process == who) {
            h.count = h.count.checked_add(1).ok_or(EmuError::LimitExceeded {
                what: "acquisitions by one process",
                limit: u32::MAX as usize,
            })?;
            return Ok(h.count);
        }
        if self.holders.len() >= MAX_HOLDERS {
            return Err(EmuError::LimitExceeded {
                what: "holder processes",
                limit: MAX_HOLDERS,
            });
        }
        self.holders.push(Holder {
            process: who,
            count: 1,
        });
        Ok(1)
    }

    /// Releases one acquisition by `who`; returns its remaining count (0: no longer a
    /// holder). [`EmuError::NotHolder`] if `who` holds nothing.
    pub fn remove_holder(&mut self, who: ProcessIdentity) -> Result<u32, EmuError> {
        let idx =
            self.holders
                .iter()
                .position(|h| h.process == who)
                .ok_or(EmuError::NotHolder {
                    id: self.info.id,
                    who,
                })?;
        self.holders[idx].count -= 1;
        let left = self.holders[idx].count;
        if left == 0 {
            self.holders.remove(idx);
        }
        Ok(left)
    }

    /// Drops every acquisition of `who`; returns how many there were.
    pub fn remove_holder_entirely(&mut self, who: ProcessIdentity) -> u32 {
        let before = self.hold_count(who);
        self.holders.retain(|h| h.process != who);
        before
    }

    /// Drops every holder, so the object is freed when the update that did this ends.
    pub fn clear_holders(&mut self) {
        self.holders.clear();
    }

    /// Drops holders for which `alive` is false; returns how many holder processes were
    /// dropped.
    pub fn reclaim(&mut self, mut alive: impl FnMut(&ProcessIdentity) -> bool) -> usize {
        let before = self.holders.len();
        self.holders.retain(|h| alive(&h.process));
        before - self.holders.len()
    }

    /// Serialises to the text format described in the module docs.
    pub fn encode(&self) -> String {
        let i = &self.info;
        let mut s = String::with_capacity(256 + 16 * (self.trustlist.len() + self.holders.len()));
        // Writing to a String cannot fail.
        let _ = writeln!(s, "{HEADER}");
        let _ = writeln!(s, "id {}", i.id);
        let _ = writeln!(s, "vendor {}", i.vendor);
        let _ = writeln!(s, "kind {}", i.kind);
        let _ = writeln!(s, "device {}", i.device);
        let _ = writeln!(s, "size {}", i.size);
        let _ = writeln!(s, "charged {}", i.charged);
        let _ = writeln!(s, "segment {}", i.segment_len);
        let _ = writeln!(
            s,
            "exporter {} {} {}",
            i.exporter.pid, i.exporter.start_time, i.exporter.pid_ns
        );
        match i.parent {
            Some(p) => {
                let _ = writeln!(s, "parent {p}");
            }
            None => s.push_str("parent -\n"),
        }
        let _ = writeln!(s, "offset {}", i.offset);
        let _ = writeln!(s, "flags {:#x}", self.flags.0);
        let _ = writeln!(s, "aux {:#x}", self.aux);
        if !self.trustlist.is_empty() {
            s.push_str("trust");
            for pid in &self.trustlist {
                let _ = write!(s, " {pid}");
            }
            s.push('\n');
        }
        for h in &self.holders {
            let _ = writeln!(
                s,
                "holder {} {} {} {}",
                h.process.pid, h.process.start_time, h.process.pid_ns, h.count
            );
        }
        s
    }

    /// Parses the text format; total over all inputs.
    pub fn decode(text: &str) -> Result<ObjectMeta, MetaParseError> {
        Parser::default().run(text)
    }
}

/// Why a metadata file could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaParseError {
    /// 1-based line number (0: the file as a whole).
    pub line: usize,
    /// What is wrong.
    pub reason: String,
}

impl fmt::Display for MetaParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}", self.reason)
        } else {
            write!(f, "line {}: {}", self.line, self.reason)
        }
    }
}

impl std::error::Error for MetaParseError {}

#[derive(Default)]
struct Parser {
    /// A version 1 file: processes without a pid namespace, read as `legacy_ns`.
    legacy_ns: Option<u32>,
    id: Option<ObjectId>,
    vendor: Option<Vendor>,
    kind: Option<ObjectKind>,
    device: Option<u32>,
    size: Option<u64>,
    charged: Option<u64>,
    segment: Option<u64>,
    exporter: Option<ProcessIdentity>,
    parent: Option<Option<ObjectId>>,
    offset: Option<u64>,
    flags: Option<u64>,
    aux: Option<u64>,
    trust_seen: bool,
    trustlist: Vec<i32>,
    holders: Vec<Holder>,
}

fn set_once<T>(slot: &mut Option<T>, value: T, key: &str) -> Result<(), String> {
    if slot.is_some() {
        return Err(format!("duplicate key {key:?}"));
    }
    *slot = Some(value);
    Ok(())
}

fn num<T: std::str::FromStr>(text: &str, what: &str) -> Result<T, String> {
    // FromStr for integers accepts a leading '+'; the format never writes one.
    if text.starts_with('+') {
        return Err(format!("bad {what} {text:?}"));
    }
    text.parse().map_err(|_| format!("bad {what} {text:?}"))
}

fn hex(text: &str, what: &str) -> Result<u64, String> {
    let digits = text
        .strip_prefix("0x")
        .filter(|d| !d.is_empty() && d.len() <= 16 && d.bytes().all(|b| b.is_ascii_hexdigit()))
        .ok_or_else(|| format!("bad {what} {text:?}"))?;
    u64::from_str_radix(digits, 16).map_err(|_| format!("bad {what} {text:?}"))
}

fn one<'a>(args: &[&'a str], key: &str) -> Result<&'a str, String> {
    match args {
        [a] => Ok(a),
        _ => Err(format!("{key} takes one value")),
    }
}

impl Parser {
    fn run(mut self, text: &str) -> Result<ObjectMeta, MetaParseError> {
        let whole = |reason: &str| MetaParseError {
            line: 0,
            reason: reason.to_owned(),
        };
        if text.len() > MAX_META_BYTES {
            return Err(whole("metadata file too large"));
        }
        let mut lines = text.lines().enumerate();
        match lines.next() {
            Some((_, HEADER)) => {}
            Some((_, HEADER_V1)) => {
                self.legacy_ns = Some(ProcessIdentity::current_pid_ns());
            }
            _ => return Err(whole("missing header 'devipc-emu-object 2'")),
        }
        for (n, line) in lines {
            self.line(line).map_err(|reason| MetaParseError {
                line: n + 1,
                reason,
            })?;
        }
        self.finish().map_err(|r| whole(&r))
    }

    fn line(&mut self, line: &str) -> Result<(), String> {
        let mut words = line.split(' ');
        let key = words.next().unwrap_or("");
        let args: Vec<&str> = words.collect();
        if args.iter().any(|a| a.is_empty()) {
            return Err("empty field (double or trailing space)".into());
        }
        match key {
            "id" => {
                let id = ObjectId::parse_hex(one(&args, key)?).ok_or("bad id")?;
                set_once(&mut self.id, id, key)
            }
            "vendor" => {
                let v = Vendor::from_name(one(&args, key)?).ok_or("unknown vendor")?;
                set_once(&mut self.vendor, v, key)
            }
            "kind" => {
                let k = ObjectKind::from_name(one(&args, key)?).ok_or("unknown kind")?;
                set_once(&mut self.kind, k, key)
            }
            "device" => set_once(&mut self.device, num(one(&args, key)?, key)?, key),
            "size" => set_once(&mut self.size, num(one(&args, key)?, key)?, key),
            "charged" => set_once(&mut self.charged, num(one(&args, key)?, key)?, key),
            "segment" => set_once(&mut self.segment, num(one(&args, key)?, key)?, key),
            "offset" => set_once(&mut self.offset, num(one(&args, key)?, key)?, key),
            "flags" => set_once(&mut self.flags, hex(one(&args, key)?, key)?, key),
            "aux" => set_once(&mut self.aux, hex(one(&args, key)?, key)?, key),
            "exporter" => {
                let p = self.process(&args, "exporter")?;
                set_once(&mut self.exporter, p, key)
            }
            "parent" => {
                let v = one(&args, key)?;
                let parent = if v == "-" {
                    None
                } else {
                    Some(ObjectId::parse_hex(v).ok_or("bad parent id")?)
                };
                set_once(&mut self.parent, parent, key)
            }
            "trust" => {
                if self.trust_seen {
                    return Err("duplicate key \"trust\"".into());
                }
                self.trust_seen = true;
                if args.is_empty() || args.len() > MAX_TRUSTLIST {
                    return Err("trust needs 1..=MAX_TRUSTLIST pids".into());
                }
                for a in args {
                    let pid: i32 = num(a, "pid")?;
                    if self.trustlist.contains(&pid) {
                        return Err(format!("duplicate trusted pid {pid}"));
                    }
                    self.trustlist.push(pid);
                }
                Ok(())
            }
            "holder" => {
                let Some((count, who)) = args.split_last() else {
                    return Err("holder takes a process and a count".into());
                };
                let process = self.process(who, "holder")?;
                let count: u32 = num(count, "count")?;
                if count == 0 {
                    return Err("holder count 0".into());
                }
                if self.holders.iter().any(|h| h.process == process) {
                    return Err("duplicate holder".into());
                }
                if self.holders.len() >= MAX_HOLDERS {
                    return Err("too many holders".into());
                }
                self.holders.push(Holder { process, count });
                Ok(())
            }
            other => Err(format!("unknown key {other:?}")),
        }
    }

    /// A process: pid, start time and pid namespace (version 1: pid and start time, in
    /// the reader's namespace).
    fn process(&self, args: &[&str], key: &str) -> Result<ProcessIdentity, String> {
        let (pid, start, pid_ns) = match (self.legacy_ns, args) {
            (None, [pid, start, ns]) => (pid, start, num(ns, "pid namespace")?),
            (Some(ns), [pid, start]) => (pid, start, ns),
            (None, _) => return Err(format!("{key} takes pid, start time and pid namespace")),
            (Some(_), _) => return Err(format!("{key} takes pid and start time")),
        };
        Ok(ProcessIdentity {
            pid: num(pid, "pid")?,
            start_time: num(start, "start time")?,
            pid_ns,
        })
    }

    fn finish(self) -> Result<ObjectMeta, String> {
        fn need<T>(v: Option<T>, key: &str) -> Result<T, String> {
            v.ok_or_else(|| format!("missing key {key:?}"))
        }
        let info = ObjectInfo {
            id: need(self.id, "id")?,
            vendor: need(self.vendor, "vendor")?,
            kind: need(self.kind, "kind")?,
            device: need(self.device, "device")?,
            size: need(self.size, "size")?,
            charged: need(self.charged, "charged")?,
            segment_len: need(self.segment, "segment")?,
            exporter: need(self.exporter, "exporter")?,
            parent: need(self.parent, "parent")?,
            offset: need(self.offset, "offset")?,
        };
        Ok(ObjectMeta {
            info,
            flags: ObjectFlags(need(self.flags, "flags")?),
            aux: need(self.aux, "aux")?,
            trustlist: self.trustlist,
            holders: self.holders,
        })
    }
}

#[cfg(test)]
mod tests;
