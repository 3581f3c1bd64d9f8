//! The shared-memory table behind [`Lease`](super::Lease): its layout (header, entries,
//! holder slots), creating and mapping table files, claiming and reclaiming holder slots,
//! and the per-process registry of mapped tables and of this process's holds. See the
//! [module docs](super) for the layout and why holds and releases cannot cross.

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
use std::sync::{Arc, Mutex};

use crate::os::{self, MappedRegion};
use crate::process::ProcessIdentity;
use devipc_core::fork::{PerProcess, forget_inherited};

/// Prefix of lease table file names.
pub(super) const PREFIX: &str = "leases-";
/// First word of a table ("devl").
const MAGIC: u32 = 0x6c76_6564;
/// Layout version (second word). Version 2 added the entry's object tag, version 3 the
/// pid namespace of the creator and of each slot's holder. A table of another version is
/// refused by [`Table::open`] (an importer cannot hold it); [`table_creator`] reads the
/// creator of a version 2 table as one of the caller's own namespace, as version 2 meant.
const VERSION: u32 = 3;
/// The last version without pid namespaces.
const VERSION_WITHOUT_NS: u32 = 2;
/// Lease entries per table; an exporter with more live leases creates another table.
pub const ENTRIES: u32 = 8192;
/// Holder slots per table: one per (importing process, lease) pair.
pub const SLOTS: u32 = 16384;
const HEADER_BYTES: usize = 64;
const ENTRY_BYTES: usize = 32;
const SLOT_BYTES: usize = 32;
const TABLE_BYTES: usize =
    HEADER_BYTES + ENTRIES as usize * ENTRY_BYTES + SLOTS as usize * SLOT_BYTES;

// Header words.
const H_MAGIC: usize = 0;
const H_VERSION: usize = 1;
pub(super) const H_CREATOR_PID: usize = 2;
pub(super) const H_CREATOR_START_LO: usize = 3;
pub(super) const H_CREATOR_START_HI: usize = 4;
/// Bumped (and futex-woken) by every release of a revoked lease's hold.
pub(super) const H_WAKE: usize = 5;
/// One past the highest slot ever claimed: scans stop there.
pub(super) const H_SLOTS_USED: usize = 6;
/// The creator's pid namespace.
pub(super) const H_CREATOR_PID_NS: usize = 7;

// Entry words.
pub(super) const E_STATUS: usize = 0;
pub(super) const E_HOLDERS: usize = 1;
pub(super) const E_GEN_LO: usize = 2;
pub(super) const E_GEN_HI: usize = 3;
/// What the exporter says the lease is for (HIP: a hash of the IPC handle), so a token
/// cannot pair one object's handle with another object's lease.
pub(super) const E_TAG_LO: usize = 4;
pub(super) const E_TAG_HI: usize = 5;

// Entry states (low two bits of the status word).
pub(super) const FREE: u32 = 0;
pub(super) const LIVE: u32 = 1;
pub(super) const REVOKED: u32 = 2;
pub(super) const SEQ_MASK: u32 = u32::MAX >> 2;

// Slot words.
/// `gen << 2 | state`: free, claiming (being written), owned. `gen` changes on every
/// release, so a reclaim decided on an old reading cannot hit a new owner.
pub(super) const S_TAG: usize = 0;
const S_PID: usize = 1;
const S_START_LO: usize = 2;
const S_START_HI: usize = 3;
const S_ENTRY: usize = 4;
const S_SEQ: usize = 5;
pub(super) const S_COUNT: usize = 6;
const S_PID_NS: usize = 7;
pub(super) const SLOT_FREE: u32 = 0;
const SLOT_CLAIMING: u32 = 1;
const SLOT_OWNED: u32 = 2;

/// Mapped tables of foreign exporters kept after their last hold (so an importer's next
/// hold does not map the file again); beyond this, unused ones are unmapped.
const FOREIGN_CACHE: usize = 64;

/// The exporter's bookkeeping of a table it created.
///
/// An entry is reused only when no slot names it any more (see [`Table::named_entries`]):
/// every change an acquire or release makes to an entry's `holders` counter happens while
/// its slot (owned, naming the entry) exists, and an acquire increments only after it saw
/// the lease live *with its slot already owned*. So once the entry is removed and a scan
/// finds no slot naming it, no late acquire or release of an old lease can still change
/// the counter, and the next lease may start it at 0.
#[derive(Debug, Default)]
pub(super) struct Own {
    /// Entries never used yet start here (they need no scan).
    pub(super) next: u32,
    /// Entries created and not removed.
    pub(super) used: u32,
    /// The file was unlinked (every lease removed); no new leases go here.
    pub(super) unlinked: bool,
    /// Entries removed, not yet seen unnamed by any slot (someone may still hold, or be
    /// acquiring, the old lease).
    pub(super) retired: Vec<u32>,
    /// Entries removed and seen unnamed by every slot after their removal: free for reuse.
    pub(super) reusable: Vec<u32>,
}

impl Own {
    /// An entry for a new lease: a fresh one, else a removed one that no slot names.
    pub(super) fn pick(&mut self, table: &Table) -> Option<u32> {
        if self.next < ENTRIES {
            self.next += 1;
            return Some(self.next - 1);
        }
        if self.reusable.is_empty() && !self.retired.is_empty() {
            let named = table.named_entries();
            let (named, unnamed) = std::mem::take(&mut self.retired)
                .into_iter()
                .partition(|i| named.contains(i));
            self.retired = named;
            self.reusable = unnamed;
        }
        self.reusable.pop()
    }
}

/// One mapped table.
#[derive(Debug)]
pub(super) struct Table {
    pub(super) id: u64,
    pub(super) path: PathBuf,
    pub(super) region: MappedRegion,
    /// `Some` in the process that created the table (and in its forked children, which
    /// must not use it: see [`Table::inherited`]).
    pub(super) own: Option<Mutex<Own>>,
    /// The pid of the process that created the table, when it was this process or the
    /// parent it forked from; 0 for a table mapped from another exporter.
    made_by: u32,
}

impl Table {
    fn word(&self, offset: usize) -> &AtomicU32 {
        // Offsets are computed from the constant layout and checked indices, inside the
        // mapping and aligned: a failure here is a bug in this module.
        self.region
            .atomic_u32(offset)
            .expect("lease table offsets are in range and aligned")
    }
    pub(super) fn header(&self, w: usize) -> &AtomicU32 {
        self.word(w * 4)
    }
    pub(super) fn entry(&self, index: u32, w: usize) -> &AtomicU32 {
        self.word(HEADER_BYTES + index as usize * ENTRY_BYTES + w * 4)
    }
    pub(super) fn slot(&self, index: u32, w: usize) -> &AtomicU32 {
        self.word(
            HEADER_BYTES + ENTRIES as usize * ENTRY_BYTES + index as usize * SLOT_BYTES + w * 4,
        )
    }

    pub(super) fn create(dir: &Path) -> io::Result<Table> {
        let mut random = [0u8; 8];
        os::random_bytes(&mut random)?;
        let id = u64::from_le_bytes(random);
        let path = dir.join(format!("{PREFIX}{id:016x}"));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)?;
        let made = file
            .set_len(TABLE_BYTES as u64)
            .and_then(|()| MappedRegion::map_file(&file, TABLE_BYTES))
            .and_then(|region| {
                let me = ProcessIdentity::current()?;
                // Before the identity is written: processes of other pid namespaces judge
                // the creator by its beacon.
                crate::liveness::announce(dir)?;
                let table = Table {
                    id,
                    path: path.clone(),
                    region,
                    own: Some(Mutex::new(Own::default())),
                    made_by: std::process::id(),
                };
                table.header(H_CREATOR_PID).store(me.pid as u32, SeqCst);
                table
                    .header(H_CREATOR_START_LO)
                    .store(me.start_time as u32, SeqCst);
                table
                    .header(H_CREATOR_START_HI)
                    .store((me.start_time >> 32) as u32, SeqCst);
                table.header(H_CREATOR_PID_NS).store(me.pid_ns, SeqCst);
                table.header(H_VERSION).store(VERSION, SeqCst);
                table.header(H_MAGIC).store(MAGIC, SeqCst);
                Ok(table)
            });
        if made.is_err() {
            let _ = std::fs::remove_file(&path);
        }
        made
    }

    pub(super) fn open(dir: &Path, id: u64) -> io::Result<Table> {
        let path = dir.join(format!("{PREFIX}{id:016x}"));
        let file = OpenOptions::new().read(true).write(true).open(&path)?;
        if file.metadata()?.len() < TABLE_BYTES as u64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "lease table is too short",
            ));
        }
        // The mapping outlives `file`: no descriptor stays open.
        let region = MappedRegion::map_file(&file, TABLE_BYTES)?;
        let table = Table {
            id,
            path,
            region,
            own: None,
            made_by: 0,
        };
        if table.header(H_MAGIC).load(SeqCst) != MAGIC
            || table.header(H_VERSION).load(SeqCst) != VERSION
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "not a devipc lease table of this version",
            ));
        }
        Ok(table)
    }

    pub(super) fn dir(&self) -> Option<&Path> {
        self.path.parent()
    }

    /// Whether this is a table of the parent this process was forked from: its leases are
    /// the parent's, which the child never revokes, removes or unlinks.
    pub(super) fn inherited(&self) -> bool {
        self.own.is_some() && self.made_by != std::process::id()
    }

    /// Whether `who` (a creator or holder recorded in this table) is alive.
    pub(super) fn is_alive(&self, who: &ProcessIdentity) -> bool {
        who.is_alive_in(self.dir().unwrap_or(Path::new("/")))
    }

    /// Bumps the wake word and wakes the exporter's waiter.
    pub(super) fn wake(&self) {
        let w = self.header(H_WAKE);
        w.fetch_add(1, SeqCst);
        let _ = crate::futex::wake_all(w);
    }

    fn slot_owner(&self, s: u32) -> ProcessIdentity {
        ProcessIdentity {
            pid: self.slot(s, S_PID).load(SeqCst) as i32,
            start_time: u64::from(self.slot(s, S_START_LO).load(SeqCst))
                | u64::from(self.slot(s, S_START_HI).load(SeqCst)) << 32,
            pid_ns: self.slot(s, S_PID_NS).load(SeqCst),
        }
    }

    /// Claims a free slot for `who` holding entry `index` at `seq` once.
    pub(super) fn claim_slot(&self, who: ProcessIdentity, index: u32, seq: u32) -> io::Result<u32> {
        for s in 0..SLOTS {
            let tag = self.slot(s, S_TAG);
            let t = tag.load(SeqCst);
            if t & 3 != SLOT_FREE
                || tag
                    .compare_exchange(t, t | SLOT_CLAIMING, SeqCst, SeqCst)
                    .is_err()
            {
                continue;
            }
            self.slot(s, S_PID).store(who.pid as u32, SeqCst);
            self.slot(s, S_START_LO)
                .store(who.start_time as u32, SeqCst);
            self.slot(s, S_START_HI)
                .store((who.start_time >> 32) as u32, SeqCst);
            self.slot(s, S_PID_NS).store(who.pid_ns, SeqCst);
            self.slot(s, S_ENTRY).store(index, SeqCst);
            self.slot(s, S_SEQ).store(seq, SeqCst);
            self.slot(s, S_COUNT).store(1, SeqCst);
            tag.store((t & !3) | SLOT_OWNED, SeqCst);
            self.header(H_SLOTS_USED).fetch_max(s + 1, SeqCst);
            return Ok(s);
        }
        // Full: slots of processes that died holding a lease (killed importers) are
        // reclaimed here too, not only by the exporter's scans, so crashed importers
        // cannot use the table up while the exporter keeps its objects.
        if self.reclaim_dead_slots() > 0 {
            return self.claim_slot(who, index, seq);
        }
        Err(io::Error::new(
            io::ErrorKind::OutOfMemory,
            format!("the exporter's lease table has no free holder slot (all {SLOTS} in use)"),
        ))
    }

    /// Walks the owned slots (a slot still being claimed names nothing yet), frees those
    /// whose owners are dead, and calls `live` with each slot of a live owner. Returns how
    /// many slots it freed. Liveness is asked once per owner and walk.
    fn walk_owned_slots(&self, mut live: impl FnMut(u32)) -> usize {
        let used = self.header(H_SLOTS_USED).load(SeqCst).min(SLOTS);
        let mut alive: HashMap<ProcessIdentity, bool> = HashMap::new();
        let mut freed = 0;
        for s in 0..used {
            let t = self.slot(s, S_TAG).load(SeqCst);
            if t & 3 != SLOT_OWNED {
                continue;
            }
            let who = self.slot_owner(s);
            if *alive.entry(who).or_insert_with(|| self.is_alive(&who)) {
                live(s);
            } else if self.free_slot(s, t) {
                freed += 1;
            }
        }
        freed
    }

    /// Frees the slots whose owners are dead; returns how many.
    fn reclaim_dead_slots(&self) -> usize {
        self.walk_owned_slots(|_| {})
    }

    /// Frees slot `s` (its owner released its last hold, or died).
    pub(super) fn free_slot(&self, s: u32, tag_seen: u32) -> bool {
        let next = (tag_seen & !3).wrapping_add(4) | SLOT_FREE;
        let tag = self.slot(s, S_TAG);
        if tag_seen & 3 == SLOT_OWNED {
            // Only the owner frees an owned slot without a reading; others (reclaiming a
            // dead owner) must not hit a slot re-owned since they looked.
            return tag.compare_exchange(tag_seen, next, SeqCst, SeqCst).is_ok();
        }
        false
    }

    /// The entries that an owned slot of a live holder names (at any `seq`); reclaims the
    /// slots of dead holders on the way. A slot still being claimed names nothing yet: its
    /// claimer checks the lease is live only after it owns the slot, and gives up without
    /// touching the counter when it is not (so it cannot be the late acquire of a removed
    /// entry).
    pub(super) fn named_entries(&self) -> std::collections::HashSet<u32> {
        let mut named = std::collections::HashSet::new();
        self.walk_owned_slots(|s| {
            named.insert(self.slot(s, S_ENTRY).load(SeqCst));
        });
        named
    }

    /// Live holds of entry `index` at `seq`, from the slots; reclaims the slots of dead
    /// holders (any entry) on the way.
    pub(super) fn scan_live(&self, index: u32, seq: u32) -> u64 {
        let mut live = 0;
        self.walk_owned_slots(|s| {
            if self.slot(s, S_ENTRY).load(SeqCst) == index
                && self.slot(s, S_SEQ).load(SeqCst) == seq
            {
                live += u64::from(self.slot(s, S_COUNT).load(SeqCst));
            }
        });
        live
    }
}

/// Tables this process created, and foreign tables it mapped.
#[derive(Default)]
pub(super) struct Registry {
    pub(super) own: Vec<Arc<Table>>,
    pub(super) foreign: HashMap<(PathBuf, u64), Arc<Table>>,
}

/// Per process: a `fork`ed child must not hand out its parent's lease entries (nor take a
/// lock a parent thread held at the fork); the parent's registry is forgotten there.
pub(super) static REGISTRY: PerProcess<Registry> = PerProcess::new(forget_inherited);

/// Holds of this process: (table, entry, seq, holder) -> (slot, count).
type HoldKey = (u64, u32, u32, ProcessIdentity);
type Holds = HashMap<HoldKey, (u32, u32)>;
/// Per process: a forked child must not release its parent's holds.
pub(super) static HOLDS: PerProcess<Holds> = PerProcess::new(forget_inherited);

/// The table `id` in `dir`: one of ours, one mapped before, or mapped now.
pub(super) fn table(dir: &Path, id: u64) -> io::Result<Arc<Table>> {
    let mut reg = REGISTRY.lock();
    if let Some(t) = reg.own.iter().find(|t| t.id == id && t.dir() == Some(dir)) {
        return Ok(t.clone());
    }
    let key = (dir.to_path_buf(), id);
    if let Some(t) = reg.foreign.get(&key) {
        return Ok(t.clone());
    }
    let t = Arc::new(Table::open(dir, id)?);
    if reg.foreign.len() >= FOREIGN_CACHE {
        // Only the cache refers to these: nobody holds a lease of theirs.
        reg.foreign.retain(|_, t| Arc::strong_count(t) > 1);
    }
    reg.foreign.insert(key, t.clone());
    Ok(t)
}

/// Reads the creator recorded in the table file at `path`.
pub(super) fn table_creator(path: &Path) -> io::Result<ProcessIdentity> {
    let mut head = [0u8; 4 * (H_CREATOR_PID_NS + 1)];
    crate::private_dir::open_regular_file(path)?.read_exact(&mut head)?;
    let word = |i: usize| {
        u32::from_ne_bytes([
            head[4 * i],
            head[4 * i + 1],
            head[4 * i + 2],
            head[4 * i + 3],
        ])
    };
    if word(H_MAGIC) != MAGIC {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "not a lease table",
        ));
    }
    let pid_ns = match word(H_VERSION) {
        VERSION => word(H_CREATOR_PID_NS),
        VERSION_WITHOUT_NS => ProcessIdentity::current_pid_ns(),
        _ => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "a lease table of an unknown version",
            ));
        }
    };
    Ok(ProcessIdentity {
        pid: word(H_CREATOR_PID) as i32,
        start_time: u64::from(word(H_CREATOR_START_LO)) | u64::from(word(H_CREATOR_START_HI)) << 32,
        pid_ns,
    })
}
