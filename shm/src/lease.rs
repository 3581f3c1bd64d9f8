//! [`Lease`]: a crash-safe count of the processes that hold a shared object, in a
//! shared-memory table per exporting process.
//!
//! An exporter that must not release an object while importers use it (HIP: `hipFree`
//! before the importers' `hipIpcCloseMemHandle` is undefined behaviour; Ascend IPC keys:
//! importers must close before the exporter) creates a lease and names it in the token.
//! Each importer adds itself ([`Lease::acquire`]) before it maps the object and removes
//! itself ([`Lease::release`]) after it unmapped it. The exporter [revokes](Lease::revoke)
//! the lease when its owner lets go of the object (new acquires then fail, so a replayed
//! token is refused before the vendor maps anything), and releases the object once
//! nobody holds it.
//!
//! # Layout
//!
//! The leases of one exporting process live in a table file `leases-<16 hex>` in a
//! [private directory](crate::private_dir), which every participant maps `MAP_SHARED`
//! (no file descriptor stays open). It has a header (creator pid + start time, a futex
//! word bumped by every release of a revoked lease), [`ENTRIES`] lease entries and
//! [`SLOTS`] holder slots:
//!
//! - an entry is a status word `seq << 2 | state` (free / live / revoked; `seq` counts the
//!   entry's reuses, so a stale name never matches a later lease), a `holders` counter
//!   and the generation the exporter bound to the object;
//! - a slot records one holding process (pid + start time) with its count of holds on
//!   one entry. Slots make holds crash-safe: a killed importer's slot is recognised as
//!   dead (the pid is gone or now belongs to a process with another start time) and
//!   reclaimed, so it never keeps an object alive.
//!
//! A lease's name (what tokens carry) is the table id, the entry index and its `seq`, in
//! [`NAME_LEN`] hex digits.
//!
//! # Why holds and releases cannot cross
//!
//! An acquire writes its slot, increments `holders`, and only then re-reads the status
//! (undoing everything when it is not live any more); the exporter stores "revoked" and
//! only then reads `holders` (and, to discount dead holders, the slots). All of these are
//! sequentially consistent, so at least one side sees the other: either the acquire
//! fails, or the exporter sees the hold and waits. An exporter that sees `holders == 0`
//! after revoking may release at once; `holders > 0` may include holders that died, which
//! only a scan of the slots (with liveness checks in `/proc`) tells apart.
//!
//! The table is unlinked when its creator has removed every lease in it; a table left by
//! a killed exporter is removed by [`sweep_orphans`] in the next process.
//!
//! # What a table does not defend against
//!
//! Tables live in the user's private (0700) runtime directory, so every participant is a
//! process of the same user. Tokens are untrusted (a forged lease name, generation, tag or
//! producer is refused), but the table's words are not: a process of the same user that
//! writes into a table (a zero holder count, a freed slot) or truncates it (every process
//! mapping it then takes `SIGBUS`) can make an exporter release an object early, as it
//! could by writing the emulator's files or attaching a debugger. The counter never wraps,
//! so overflowing it by holding is refused instead of reading as "unheld".

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::process::ProcessIdentity;
use crate::sys::{self, MappedRegion};
use crate::word_file::NAME_LEN;

/// Prefix of lease table file names.
const PREFIX: &str = "leases-";
/// First word of a table ("devl").
const MAGIC: u32 = 0x6c76_6564;
/// Layout version (second word). Version 2 added the entry's object tag.
const VERSION: u32 = 2;
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
const H_CREATOR_PID: usize = 2;
const H_CREATOR_START_LO: usize = 3;
const H_CREATOR_START_HI: usize = 4;
/// Bumped (and futex-woken) by every release of a revoked lease's hold.
const H_WAKE: usize = 5;
/// One past the highest slot ever claimed: scans stop there.
const H_SLOTS_USED: usize = 6;

// Entry words.
const E_STATUS: usize = 0;
const E_HOLDERS: usize = 1;
const E_GEN_LO: usize = 2;
const E_GEN_HI: usize = 3;
/// What the exporter says the lease is for (HIP: a hash of the IPC handle), so a token
/// cannot pair one object's handle with another object's lease.
const E_TAG_LO: usize = 4;
const E_TAG_HI: usize = 5;

// Entry states (low two bits of the status word).
const FREE: u32 = 0;
const LIVE: u32 = 1;
const REVOKED: u32 = 2;
const SEQ_MASK: u32 = u32::MAX >> 2;

// Slot words.
/// `gen << 2 | state`: free, claiming (being written), owned. `gen` changes on every
/// release, so a reclaim decided on an old reading cannot hit a new owner.
const S_TAG: usize = 0;
const S_PID: usize = 1;
const S_START_LO: usize = 2;
const S_START_HI: usize = 3;
const S_ENTRY: usize = 4;
const S_SEQ: usize = 5;
const S_COUNT: usize = 6;
const SLOT_FREE: u32 = 0;
const SLOT_CLAIMING: u32 = 1;
const SLOT_OWNED: u32 = 2;

/// Mapped tables of foreign exporters kept after their last hold (so an importer's next
/// hold does not map the file again); beyond this, unused ones are unmapped.
const FOREIGN_CACHE: usize = 64;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn gone(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, what.to_owned())
}

/// The exporter's bookkeeping of a table it created.
#[derive(Debug, Default)]
struct Own {
    /// Entries removed and free for reuse.
    free: Vec<u32>,
    /// Entries never used yet start here.
    next: u32,
    /// Entries created and not removed.
    used: u32,
    /// The file was unlinked (every lease removed); no new leases go here.
    unlinked: bool,
    /// Entries removed while someone still held them: `(index, seq)`. Reused only once
    /// no live process holds the old lease, so a late release of an old hold can never
    /// lower the count of the entry's next lease.
    zombies: Vec<(u32, u32)>,
}

/// One mapped table.
#[derive(Debug)]
struct Table {
    id: u64,
    path: PathBuf,
    region: MappedRegion,
    /// `Some` in the process that created the table.
    own: Option<Mutex<Own>>,
}

impl Table {
    fn word(&self, offset: usize) -> &AtomicU32 {
        // Offsets are computed from the constant layout and checked indices, inside the
        // mapping and aligned: a failure here is a bug in this module.
        self.region
            .atomic_u32(offset)
            .expect("lease table offsets are in range and aligned")
    }
    fn header(&self, w: usize) -> &AtomicU32 {
        self.word(w * 4)
    }
    fn entry(&self, index: u32, w: usize) -> &AtomicU32 {
        self.word(HEADER_BYTES + index as usize * ENTRY_BYTES + w * 4)
    }
    fn slot(&self, index: u32, w: usize) -> &AtomicU32 {
        self.word(
            HEADER_BYTES + ENTRIES as usize * ENTRY_BYTES + index as usize * SLOT_BYTES + w * 4,
        )
    }

    fn create(dir: &Path) -> io::Result<Table> {
        let mut random = [0u8; 8];
        sys::random_bytes(&mut random)?;
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
                let table = Table {
                    id,
                    path: path.clone(),
                    region,
                    own: Some(Mutex::new(Own::default())),
                };
                table.header(H_CREATOR_PID).store(me.pid as u32, SeqCst);
                table
                    .header(H_CREATOR_START_LO)
                    .store(me.start_time as u32, SeqCst);
                table
                    .header(H_CREATOR_START_HI)
                    .store((me.start_time >> 32) as u32, SeqCst);
                table.header(H_VERSION).store(VERSION, SeqCst);
                table.header(H_MAGIC).store(MAGIC, SeqCst);
                Ok(table)
            });
        if made.is_err() {
            let _ = std::fs::remove_file(&path);
        }
        made
    }

    fn open(dir: &Path, id: u64) -> io::Result<Table> {
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

    fn dir(&self) -> Option<&Path> {
        self.path.parent()
    }

    /// Bumps the wake word and wakes the exporter's waiter.
    fn wake(&self) {
        let w = self.header(H_WAKE);
        w.fetch_add(1, SeqCst);
        let _ = crate::futex::wake_all(w);
    }

    fn slot_owner(&self, s: u32) -> ProcessIdentity {
        ProcessIdentity {
            pid: self.slot(s, S_PID).load(SeqCst) as i32,
            start_time: u64::from(self.slot(s, S_START_LO).load(SeqCst))
                | u64::from(self.slot(s, S_START_HI).load(SeqCst)) << 32,
        }
    }

    /// Claims a free slot for `who` holding entry `index` at `seq` once.
    fn claim_slot(&self, who: ProcessIdentity, index: u32, seq: u32) -> io::Result<u32> {
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

    /// Frees the slots whose owners are dead; returns how many.
    fn reclaim_dead_slots(&self) -> usize {
        let used = self.header(H_SLOTS_USED).load(SeqCst).min(SLOTS);
        let mut alive: HashMap<ProcessIdentity, bool> = HashMap::new();
        let mut freed = 0;
        for s in 0..used {
            let t = self.slot(s, S_TAG).load(SeqCst);
            if t & 3 != SLOT_OWNED {
                continue;
            }
            let who = self.slot_owner(s);
            if !*alive.entry(who).or_insert_with(|| who.is_alive()) && self.free_slot(s, t) {
                freed += 1;
            }
        }
        freed
    }

    /// Frees slot `s` (its owner released its last hold, or died).
    fn free_slot(&self, s: u32, tag_seen: u32) -> bool {
        let next = (tag_seen & !3).wrapping_add(4) | SLOT_FREE;
        let tag = self.slot(s, S_TAG);
        if tag_seen & 3 == SLOT_OWNED {
            // Only the owner frees an owned slot without a reading; others (reclaiming a
            // dead owner) must not hit a slot re-owned since they looked.
            return tag.compare_exchange(tag_seen, next, SeqCst, SeqCst).is_ok();
        }
        false
    }

    /// Live holds of entry `index` at `seq`, from the slots; reclaims the slots of dead
    /// holders (any entry) on the way.
    fn scan_live(&self, index: u32, seq: u32) -> u64 {
        let used = self.header(H_SLOTS_USED).load(SeqCst).min(SLOTS);
        let mut alive: HashMap<ProcessIdentity, bool> = HashMap::new();
        let mut live = 0;
        for s in 0..used {
            let t = self.slot(s, S_TAG).load(SeqCst);
            if t & 3 != SLOT_OWNED {
                // Free, or being claimed: a claimer increments `holders` only after it
                // owns the slot, and re-checks the status afterwards.
                continue;
            }
            let who = self.slot_owner(s);
            if !*alive.entry(who).or_insert_with(|| who.is_alive()) {
                self.free_slot(s, t);
                continue;
            }
            if self.slot(s, S_ENTRY).load(SeqCst) == index
                && self.slot(s, S_SEQ).load(SeqCst) == seq
            {
                live += u64::from(self.slot(s, S_COUNT).load(SeqCst));
            }
        }
        live
    }
}

/// Tables this process created, and foreign tables it mapped.
#[derive(Default)]
struct Registry {
    own: Vec<Arc<Table>>,
    foreign: HashMap<(PathBuf, u64), Arc<Table>>,
}

static REGISTRY: Mutex<Option<Registry>> = Mutex::new(None);

/// Holds of this process: (table, entry, seq, holder) -> (slot, count).
type HoldKey = (u64, u32, u32, ProcessIdentity);
static HOLDS: Mutex<Option<HashMap<HoldKey, (u32, u32)>>> = Mutex::new(None);

/// The table `id` in `dir`: one of ours, one mapped before, or mapped now.
fn table(dir: &Path, id: u64) -> io::Result<Arc<Table>> {
    let mut reg = lock(&REGISTRY);
    let reg = reg.get_or_insert_with(Registry::default);
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

/// What an importer expects of a lease, from its token (see [`Lease::acquire_for`]);
/// `None` fields are not checked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Binding {
    /// The object's generation.
    pub generation: Option<u64>,
    /// The exporter's tag for the object (see [`Lease::create_tagged`]).
    pub tag: Option<u64>,
    /// The exporter: the process that created the lease's table.
    pub creator: Option<ProcessIdentity>,
}

/// A lease: one entry of a table. The value holds no file descriptor (an importer may
/// hold thousands); dropping it does not end the lease ([`Lease::remove`] does).
#[derive(Debug)]
pub struct Lease {
    table: Arc<Table>,
    index: u32,
    seq: u32,
    name: [u8; NAME_LEN],
}

fn encode(id: u64, index: u32, seq: u32) -> [u8; NAME_LEN] {
    let text = format!("{id:016x}{index:08x}{seq:08x}");
    let mut name = [0u8; NAME_LEN];
    name.copy_from_slice(text.as_bytes());
    name
}

fn decode(name: &[u8]) -> io::Result<(u64, u32, u32)> {
    let bad = || io::Error::new(io::ErrorKind::InvalidInput, "malformed lease name");
    if name.len() != NAME_LEN
        || !name
            .iter()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
    {
        return Err(bad());
    }
    let text = std::str::from_utf8(name).map_err(|_| bad())?;
    let id = u64::from_str_radix(&text[..16], 16).map_err(|_| bad())?;
    let index = u32::from_str_radix(&text[16..24], 16).map_err(|_| bad())?;
    let seq = u32::from_str_radix(&text[24..], 16).map_err(|_| bad())?;
    if index >= ENTRIES || seq > SEQ_MASK {
        return Err(bad());
    }
    Ok((id, index, seq))
}

impl Lease {
    /// Creates a live lease in this process's table in `dir`, bound to generation 0.
    pub fn create(dir: &Path) -> io::Result<Lease> {
        Lease::create_bound(dir, 0)
    }

    /// Creates a live lease in this process's table in `dir` (a new table when there is
    /// none or it is full), bound to `generation`: [`Lease::acquire_checked`] refuses any
    /// other.
    pub fn create_bound(dir: &Path, generation: u64) -> io::Result<Lease> {
        Lease::create_tagged(dir, generation, 0)
    }

    /// As [`Lease::create_bound`], also bound to `tag` (what the lease is for, e.g. a
    /// hash of the vendor handle; 0 = none): [`Lease::acquire_for`] refuses another.
    pub fn create_tagged(dir: &Path, generation: u64, tag: u64) -> io::Result<Lease> {
        let mut reg = lock(&REGISTRY);
        let reg = reg.get_or_insert_with(Registry::default);
        let mut picked = None;
        for t in reg.own.iter().filter(|t| t.dir() == Some(dir)) {
            let Some(own) = &t.own else { continue };
            let mut own = lock(own);
            if own.unlinked {
                continue;
            }
            let index = own
                .free
                .pop()
                .or_else(|| {
                    (own.next < ENTRIES).then(|| {
                        own.next += 1;
                        own.next - 1
                    })
                })
                .or_else(|| {
                    // Full: a removed lease's entry whose holders have all gone.
                    let at = own
                        .zombies
                        .iter()
                        .position(|&(i, seq)| t.scan_live(i, seq) == 0)?;
                    Some(own.zombies.swap_remove(at).0)
                });
            if let Some(index) = index {
                own.used += 1;
                picked = Some((t.clone(), index));
                break;
            }
        }
        let (table, index) = match picked {
            Some(p) => p,
            None => {
                let t = Arc::new(Table::create(dir)?);
                if let Some(own) = &t.own {
                    let mut own = lock(own);
                    own.next = 1;
                    own.used = 1;
                }
                reg.own.push(t.clone());
                (t, 0)
            }
        };
        let status = table.entry(index, E_STATUS);
        let seq = ((status.load(SeqCst) >> 2) + 1) & SEQ_MASK;
        table.entry(index, E_HOLDERS).store(0, SeqCst);
        table
            .entry(index, E_GEN_LO)
            .store(generation as u32, SeqCst);
        table
            .entry(index, E_GEN_HI)
            .store((generation >> 32) as u32, SeqCst);
        table.entry(index, E_TAG_LO).store(tag as u32, SeqCst);
        table
            .entry(index, E_TAG_HI)
            .store((tag >> 32) as u32, SeqCst);
        status.store(seq << 2 | LIVE, SeqCst);
        Ok(Lease {
            name: encode(table.id, index, seq),
            table,
            index,
            seq,
        })
    }

    /// The existing lease `name` in `dir`. A malformed name is `InvalidInput`; a lease
    /// that is gone (removed, or its table is) is `NotFound`. A revoked lease opens (its
    /// exporter still waits for its holders) but cannot be acquired.
    pub fn open(dir: &Path, name: &[u8]) -> io::Result<Lease> {
        let (id, index, seq) = decode(name)?;
        let table = table(dir, id)?;
        let lease = Lease {
            name: encode(id, index, seq),
            table,
            index,
            seq,
        };
        match lease.state() {
            Some(_) => Ok(lease),
            None => Err(gone("the lease was removed")),
        }
    }

    /// The name to send to importers.
    pub fn name(&self) -> &[u8; NAME_LEN] {
        &self.name
    }

    /// `Some(LIVE | REVOKED)` while this lease exists, `None` once removed (or reused).
    fn state(&self) -> Option<u32> {
        let s = self.table.entry(self.index, E_STATUS).load(SeqCst);
        (s >> 2 == self.seq && s & 3 != FREE).then_some(s & 3)
    }

    /// The generation the exporter bound the lease to.
    pub fn generation(&self) -> u64 {
        u64::from(self.table.entry(self.index, E_GEN_LO).load(SeqCst))
            | u64::from(self.table.entry(self.index, E_GEN_HI).load(SeqCst)) << 32
    }

    /// Whether the exporter revoked the lease (or removed it).
    pub fn is_revoked(&self) -> bool {
        self.state() != Some(LIVE)
    }

    /// Adds one hold by `who` (the calling process, normally). Fails with `NotFound` when
    /// the lease was revoked or removed: the exporter let go of the object.
    pub fn acquire(&self, who: ProcessIdentity) -> io::Result<()> {
        self.acquire_checked(who, None)
    }

    /// As [`Lease::acquire`], and when `generation` is given, fails with `InvalidData`
    /// unless the lease is bound to it.
    pub fn acquire_checked(&self, who: ProcessIdentity, generation: Option<u64>) -> io::Result<()> {
        self.acquire_for(
            who,
            &Binding {
                generation,
                ..Binding::default()
            },
        )
    }

    /// The tag the exporter bound the lease to (0: none).
    pub fn tag(&self) -> u64 {
        u64::from(self.table.entry(self.index, E_TAG_LO).load(SeqCst))
            | u64::from(self.table.entry(self.index, E_TAG_HI).load(SeqCst)) << 32
    }

    /// The process that created the lease's table (the exporter).
    pub fn creator(&self) -> ProcessIdentity {
        ProcessIdentity {
            pid: self.table.header(H_CREATOR_PID).load(SeqCst) as i32,
            start_time: u64::from(self.table.header(H_CREATOR_START_LO).load(SeqCst))
                | u64::from(self.table.header(H_CREATOR_START_HI).load(SeqCst)) << 32,
        }
    }

    /// As [`Lease::acquire`], after checking what the token claims against what the
    /// exporter bound the lease to ([`Binding`]): a mismatch is `InvalidData`, so a token
    /// that pairs one object's handle with another object's (live) lease is refused.
    pub fn acquire_for(&self, who: ProcessIdentity, expect: &Binding) -> io::Result<()> {
        let revoked = || gone("the exporter released the object (its lease is revoked)");
        if self.state() != Some(LIVE) {
            return Err(revoked());
        }
        let mismatch = |what: String| Err(io::Error::new(io::ErrorKind::InvalidData, what));
        if let Some(g) = expect.generation
            && g != self.generation()
        {
            return mismatch(format!(
                "the token's generation {g} is not the exported object's ({})",
                self.generation()
            ));
        }
        if let Some(tag) = expect.tag
            && tag != self.tag()
        {
            return mismatch(
                "the token's lease belongs to another object than its handle".to_owned(),
            );
        }
        if let Some(creator) = expect.creator
            && creator != self.creator()
        {
            return mismatch(format!(
                "the token's lease belongs to another exporter (pid {}) than the token's \
                 producer (pid {})",
                self.creator().pid,
                creator.pid
            ));
        }
        let t = &self.table;
        {
            let mut holds = lock(&HOLDS);
            let holds = holds.get_or_insert_with(HashMap::new);
            let key = (t.id, self.index, self.seq, who);
            match holds.get_mut(&key) {
                Some((slot, count)) => {
                    *count += 1;
                    t.slot(*slot, S_COUNT).fetch_add(1, SeqCst);
                }
                None => {
                    let slot = t.claim_slot(who, self.index, self.seq)?;
                    holds.insert(key, (slot, 1));
                }
            }
        }
        // After the slot, before the re-check (see the module docs). Never wraps: a count
        // that cannot grow (only a corrupted table gets there) refuses the hold rather
        // than reading 0, which the exporter would take for "nobody holds it".
        let counted = t
            .entry(self.index, E_HOLDERS)
            .fetch_update(SeqCst, SeqCst, |h| h.checked_add(1));
        if counted.is_err() {
            self.release_slot_only(who);
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the lease's holder count is corrupt (at its maximum)",
            ));
        }
        if self.state() != Some(LIVE) {
            self.release(who);
            return Err(revoked());
        }
        Ok(())
    }

    /// Undoes the slot part of a hold whose count could not be raised.
    fn release_slot_only(&self, who: ProcessIdentity) {
        let t = &self.table;
        let mut holds = lock(&HOLDS);
        let holds = holds.get_or_insert_with(HashMap::new);
        let key = (t.id, self.index, self.seq, who);
        if let Some((slot, count)) = holds.get_mut(&key) {
            let slot = *slot;
            *count -= 1;
            if *count == 0 {
                holds.remove(&key);
                let tag = t.slot(slot, S_TAG).load(SeqCst);
                t.slot(slot, S_COUNT).store(0, SeqCst);
                t.free_slot(slot, tag);
            } else {
                t.slot(slot, S_COUNT).fetch_sub(1, SeqCst);
            }
        }
    }

    /// Removes one hold by `who`; releasing a hold it does not have is a no-op. Wakes the
    /// exporter when the lease is revoked (it may be waiting to release the object).
    pub fn release(&self, who: ProcessIdentity) {
        let t = &self.table;
        let found = {
            let mut holds = lock(&HOLDS);
            let holds = holds.get_or_insert_with(HashMap::new);
            let key = (t.id, self.index, self.seq, who);
            match holds.get_mut(&key) {
                None => false,
                Some((slot, count)) => {
                    let slot = *slot;
                    *count -= 1;
                    let last = *count == 0;
                    if last {
                        holds.remove(&key);
                    }
                    // The entry is not reused while a live process holds it (see
                    // `Own::zombies`), so this is still our lease's count.
                    let _ = t
                        .entry(self.index, E_HOLDERS)
                        .fetch_update(SeqCst, SeqCst, |h| Some(h.saturating_sub(1)));
                    if last {
                        let tag = t.slot(slot, S_TAG).load(SeqCst);
                        t.slot(slot, S_COUNT).store(0, SeqCst);
                        t.free_slot(slot, tag);
                    } else {
                        t.slot(slot, S_COUNT).fetch_sub(1, SeqCst);
                    }
                    true
                }
            }
        };
        if found && self.state() != Some(LIVE) {
            t.wake();
        }
    }

    /// The number of holds by live processes (reclaiming dead holders' slots).
    pub fn live_holders(&self) -> u64 {
        self.table.scan_live(self.index, self.seq)
    }

    /// Whether nobody holds the lease. `thorough == false` only reads the holders
    /// counter, which a killed holder may leave above zero (so `false` can be wrong, never
    /// `true`); `thorough` then checks the holders' liveness.
    pub fn is_unheld(&self, thorough: bool) -> bool {
        self.table.entry(self.index, E_HOLDERS).load(SeqCst) == 0
            || (thorough && self.live_holders() == 0)
    }

    /// Revokes the lease: every later acquire fails. Returns whether it was live.
    pub fn revoke(&self) -> bool {
        self.table
            .entry(self.index, E_STATUS)
            .compare_exchange(
                self.seq << 2 | LIVE,
                self.seq << 2 | REVOKED,
                SeqCst,
                SeqCst,
            )
            .is_ok()
    }

    /// A value of the wake word to pass to [`Lease::wait_for_release`]; read it before
    /// checking whether the lease is held.
    pub fn release_count(&self) -> u32 {
        self.table.header(H_WAKE).load(SeqCst)
    }

    /// Waits until a hold on a revoked lease of this table is released after `seen` was
    /// read with [`Lease::release_count`], or `timeout` passes (then returns normally).
    pub fn wait_for_release(&self, seen: u32, timeout: Duration) -> io::Result<()> {
        match crate::futex::wait_until(self.table.header(H_WAKE), |v| v != seen, Some(timeout)) {
            Ok(_) | Err(crate::futex::WaitError::Timeout(_)) => Ok(()),
            Err(crate::futex::WaitError::Sys { source, .. }) => Err(source),
        }
    }

    /// Wakes whoever waits in [`Lease::wait_for_release`] on this lease's table.
    pub fn wake(&self) {
        self.table.wake();
    }

    /// If no live process holds the lease: revokes it, runs `release` (the exporter's
    /// release of the object) and when it reports success removes the lease; when it
    /// fails, the lease is live again. Returns `Ok(None)` when someone holds it (nothing
    /// is run and the lease stays live), else `Ok(Some(released))`.
    pub fn release_if_unheld(&self, release: impl FnOnce() -> bool) -> io::Result<Option<bool>> {
        if self.state().is_none() {
            return Err(gone("the lease was removed"));
        }
        if !self.is_unheld(true) {
            return Ok(None);
        }
        let was_live = self.revoke();
        // Revoked first, then the holders read: an acquirer in between either sees the
        // revocation or is seen here.
        if !self.is_unheld(true) {
            if was_live {
                self.unrevoke();
            }
            return Ok(None);
        }
        if release() {
            self.remove()?;
            Ok(Some(true))
        } else {
            if was_live {
                self.unrevoke();
            }
            Ok(Some(false))
        }
    }

    fn unrevoke(&self) {
        let _ = self.table.entry(self.index, E_STATUS).compare_exchange(
            self.seq << 2 | REVOKED,
            self.seq << 2 | LIVE,
            SeqCst,
            SeqCst,
        );
    }

    /// Ends the lease: acquires of its name fail with `NotFound` from now on. Removing a
    /// removed lease does nothing. The exporter's table is unlinked with its last lease.
    pub fn remove(&self) -> io::Result<()> {
        let status = self.table.entry(self.index, E_STATUS);
        let removed = [LIVE, REVOKED].into_iter().any(|state| {
            status
                .compare_exchange(self.seq << 2 | state, self.seq << 2 | FREE, SeqCst, SeqCst)
                .is_ok()
        });
        if !removed {
            return Ok(());
        }
        let held = self.table.entry(self.index, E_HOLDERS).load(SeqCst) > 0;
        if !held {
            self.table.entry(self.index, E_HOLDERS).store(0, SeqCst);
        }
        let Some(own) = &self.table.own else {
            return Ok(());
        };
        let unlink = {
            let mut own = lock(own);
            if held {
                // Removed under holders (an exporter that forgets a lease it could not
                // release): the entry waits until they are gone before it is reused.
                own.zombies.push((self.index, self.seq));
            } else {
                own.free.push(self.index);
            }
            own.used = own.used.saturating_sub(1);
            let unlink = own.used == 0 && !own.unlinked;
            if unlink {
                own.unlinked = true;
            }
            unlink
        };
        if unlink {
            let _ = std::fs::remove_file(&self.table.path);
            let mut reg = lock(&REGISTRY);
            if let Some(reg) = reg.as_mut() {
                reg.own.retain(|t| !Arc::ptr_eq(t, &self.table));
            }
        }
        Ok(())
    }
}

/// Reads the creator recorded in the table file at `path`.
fn table_creator(path: &Path) -> io::Result<ProcessIdentity> {
    let mut head = [0u8; 20];
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
    Ok(ProcessIdentity {
        pid: word(H_CREATOR_PID) as i32,
        start_time: u64::from(word(H_CREATOR_START_LO)) | u64::from(word(H_CREATOR_START_HI)) << 32,
    })
}

/// Removes the lease tables in `dir` whose creator (the exporter) is dead: what a killed
/// exporter left behind. Importers that still map one keep working (the mapping outlives
/// the file). Returns how many it removed; unreadable entries are skipped.
pub fn sweep_orphans(dir: &Path) -> io::Result<usize> {
    crate::private_dir::sweep(dir, PREFIX, |name| {
        if name.len() != 16 || !name.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Ok(false);
        }
        let path = dir.join(format!("{PREFIX}{name}"));
        let creator = match table_creator(&path) {
            Ok(c) => c,
            // Being created right now (the header is written after the file exists).
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                let age = std::fs::metadata(&path)?
                    .modified()?
                    .elapsed()
                    .unwrap_or_default();
                if age < Duration::from_secs(60) {
                    return Ok(false);
                }
                std::fs::remove_file(&path)?;
                return Ok(true);
            }
            Err(e) => return Err(e),
        };
        if creator.is_alive() {
            return Ok(false);
        }
        std::fs::remove_file(&path)?;
        Ok(true)
    })
}

/// devipc's use of leases, with devipc errors: leases live in the
/// [runtime directory](crate::private_dir::runtime_dir), and the holder is always the
/// calling process.
pub mod held {
    use std::io;
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    use devipc_core::{Error, Result};

    use super::{Binding, Lease};
    use crate::private_dir::{RUNTIME_DIR_ENV, runtime_dir, runtime_dir_for_devipc};
    use crate::process::ProcessIdentity;

    fn io_error(what: &str, e: io::Error) -> Error {
        Error::io(format!("{what} (a devipc lease in {RUNTIME_DIR_ENV})"), e)
    }

    /// A new lease in the runtime directory, for an export.
    pub fn create() -> Result<Arc<Lease>> {
        create_bound(0)
    }

    /// A new lease bound to `generation` (see [`hold_checked`]).
    pub fn create_bound(generation: u64) -> Result<Arc<Lease>> {
        create_tagged(generation, 0)
    }

    /// A new lease bound to `generation` and `tag` (see [`hold_for`]).
    pub fn create_tagged(generation: u64, tag: u64) -> Result<Arc<Lease>> {
        let dir = runtime_dir_for_devipc()?;
        Lease::create_tagged(&dir, generation, tag)
            .map(Arc::new)
            .map_err(|e| io_error("creating a lease", e))
    }

    /// The error for a token whose object its exporter freed.
    fn freed() -> Error {
        Error::invalid_argument(format!(
            "the exporter already freed this memory: its tokens cannot be imported any more \
             (or the exporter runs with another {RUNTIME_DIR_ENV})"
        ))
    }

    /// Adds the calling process's hold on the exporter's lease `name` (from a token).
    pub fn hold(name: &[u8]) -> Result<Arc<Lease>> {
        hold_checked(name, None)
    }

    /// As [`hold`], and refuses (as an invalid token) a `generation` the lease is not
    /// bound to: a token relabelled with another object's generation.
    pub fn hold_checked(name: &[u8], generation: Option<u64>) -> Result<Arc<Lease>> {
        hold_for(
            name,
            &Binding {
                generation,
                ..Binding::default()
            },
        )
    }

    /// As [`hold`], and refuses (as an invalid token) a lease the exporter did not bind to
    /// what the token claims ([`Binding`]).
    pub fn hold_for(name: &[u8], expect: &Binding) -> Result<Arc<Lease>> {
        let dir = runtime_dir_for_devipc()?;
        let lease = Lease::open(&dir, name).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => freed(),
            io::ErrorKind::InvalidInput => {
                Error::invalid_token("malformed lease name in the token")
            }
            _ => io_error("opening a lease", e),
        })?;
        let me = ProcessIdentity::current().map_err(|e| io_error("reading /proc/self/stat", e))?;
        lease.acquire_for(me, expect).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => freed(),
            io::ErrorKind::InvalidData => Error::invalid_token(e.to_string()),
            _ => io_error("holding a lease", e),
        })?;
        Ok(Arc::new(lease))
    }

    /// Drops the calling process's hold (after its mapping is closed). Failures are
    /// logged (`log::warn!`), not returned: the mapping is gone either way, and a dead
    /// process's holds are reclaimed by the exporter anyway.
    pub fn drop_hold(lease: &Lease) {
        match ProcessIdentity::current() {
            Ok(me) => lease.release(me),
            Err(e) => log::warn!("devipc: releasing a lease hold failed: {e}"),
        }
    }

    /// The exporter's own lease `name`, reopened.
    pub fn reopen(name: &[u8]) -> Result<Lease> {
        let dir = runtime_dir_for_devipc()?;
        Lease::open(&dir, name).map_err(|e| io_error("reopening a lease", e))
    }

    /// [`drop_hold`] on the lease `name`; a lease that is gone has no hold to drop.
    pub fn drop_hold_by_name(name: &[u8]) {
        match runtime_dir()
            .map_err(io::Error::other)
            .and_then(|dir| Lease::open(&dir, name))
        {
            Ok(lease) => drop_hold(&lease),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => log::warn!("devipc: releasing a lease hold failed: {e}"),
        }
    }

    /// As [`Lease::release_if_unheld`], with devipc errors: `Ok(None)` while someone holds
    /// it, else the result of `release` (the lease is removed when it succeeded).
    pub fn release_if_unheld<T>(
        lease: &Lease,
        release: impl FnOnce() -> Result<T>,
    ) -> Result<Option<T>> {
        let mut result = None;
        lease
            .release_if_unheld(|| {
                let r = release();
                let ok = r.is_ok();
                result = Some(r);
                ok
            })
            .map_err(|e| io_error("checking a lease", e))?;
        result.transpose()
    }

    /// How often one process sweeps the runtime directory for orphaned lease tables.
    pub const SWEEP_INTERVAL: Duration = Duration::from_secs(30);

    /// [`super::sweep_orphans`] on the runtime directory, at most once per
    /// [`SWEEP_INTERVAL`] per process (backends call it when they open). Returns how many
    /// tables it removed (0 when skipped); failures are logged (`log::warn!`; a sweep is a
    /// best-effort cleanup).
    pub fn sweep_orphans_now_and_then() -> usize {
        static LAST: Mutex<Option<(std::path::PathBuf, Instant)>> = Mutex::new(None);
        let Ok(dir) = runtime_dir() else { return 0 };
        {
            let mut last = super::lock(&LAST);
            if let Some((d, at)) = last.as_ref()
                && *d == dir
                && at.elapsed() < SWEEP_INTERVAL
            {
                return 0;
            }
            *last = Some((dir.clone(), Instant::now()));
        }
        match super::sweep_orphans(&dir) {
            Ok(n) => n,
            Err(e) => {
                log::warn!(
                    "devipc: sweeping orphaned leases in {} failed: {e}",
                    dir.display()
                );
                0
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let p = std::env::temp_dir().join(format!("devipc-lease-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        crate::private_dir::open_private_dir(&p).unwrap()
    }

    fn tables(dir: &Path) -> usize {
        std::fs::read_dir(dir)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with(PREFIX)
            })
            .count()
    }

    #[test]
    fn holds_are_counted_per_process_and_released() {
        let dir = scratch("count");
        let lease = Lease::create(&dir).unwrap();
        let me = ProcessIdentity::current().unwrap();
        assert_eq!(lease.live_holders(), 0);
        let other = Lease::open(&dir, lease.name()).unwrap();
        lease.acquire(me).unwrap();
        other.acquire(me).unwrap();
        assert_eq!(lease.live_holders(), 2);
        assert!(!lease.is_unheld(false));
        other.release(me);
        assert_eq!(lease.live_holders(), 1);
        lease.release(me);
        lease.release(me);
        assert_eq!(lease.live_holders(), 0);
        assert!(lease.is_unheld(false));
        assert_eq!(tables(&dir), 1);
        lease.remove().unwrap();
        assert_eq!(
            Lease::open(&dir, lease.name()).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        // The last lease took its table with it.
        assert_eq!(tables(&dir), 0);
        std::fs::remove_dir(&dir).unwrap();
    }

    #[test]
    fn dead_holders_do_not_count() {
        let dir = scratch("dead");
        let lease = Lease::create(&dir).unwrap();
        let me = ProcessIdentity::current().unwrap();
        // The same pid with another start time is a process that reused the pid.
        let ghost = ProcessIdentity {
            pid: me.pid,
            start_time: me.start_time + 1,
        };
        lease.acquire(ghost).unwrap();
        lease
            .acquire(ProcessIdentity {
                pid: 0x7fff_fff0,
                start_time: 1,
            })
            .unwrap();
        // The counter still counts them; the thorough check does not.
        assert!(!lease.is_unheld(false));
        assert!(lease.is_unheld(true));
        assert_eq!(lease.live_holders(), 0);
        lease.acquire(me).unwrap();
        assert_eq!(lease.live_holders(), 1);
        lease.release(me);
        lease.remove().unwrap();
        std::fs::remove_dir(&dir).unwrap();
    }

    #[test]
    fn a_killed_holder_is_reclaimed() {
        let dir = scratch("killed");
        let lease = Lease::create(&dir).unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let who = ProcessIdentity::of_pid(child.id() as i32).unwrap().unwrap();
        lease.acquire(who).unwrap();
        assert_eq!(lease.live_holders(), 1);
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(lease.live_holders(), 0);
        // Its slot was reclaimed.
        let used = lease.table.header(H_SLOTS_USED).load(SeqCst);
        assert!((0..used).all(|s| lease.table.slot(s, S_TAG).load(SeqCst) & 3 == SLOT_FREE));
        lease.remove().unwrap();
        std::fs::remove_dir(&dir).unwrap();
    }

    #[test]
    fn revoked_and_removed_leases_refuse_holds() {
        let dir = scratch("revoke");
        let lease = Lease::create_bound(&dir, 7).unwrap();
        let me = ProcessIdentity::current().unwrap();
        assert_eq!(
            lease.acquire_checked(me, Some(8)).unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
        lease.acquire_checked(me, Some(7)).unwrap();
        let seen = lease.release_count();
        assert!(lease.revoke());
        assert_eq!(
            lease.acquire(me).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        // The failed acquire undid its hold: one remains.
        assert_eq!(lease.live_holders(), 1);
        lease.release(me);
        assert_ne!(lease.release_count(), seen, "the release woke the exporter");
        lease
            .wait_for_release(seen, Duration::from_secs(5))
            .unwrap();
        assert!(lease.is_unheld(false));
        lease.remove().unwrap();
        // A new lease reuses the entry with another seq: the old name stays dead.
        let next = Lease::create(&dir).unwrap();
        assert_eq!(next.index, lease.index);
        assert_ne!(next.name(), lease.name());
        assert_eq!(
            Lease::open(&dir, lease.name()).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        next.remove().unwrap();
        std::fs::remove_dir(&dir).unwrap();
    }

    #[test]
    fn release_runs_only_when_unheld_and_removes_the_lease() {
        let dir = scratch("release");
        let lease = Lease::create(&dir).unwrap();
        let me = ProcessIdentity::current().unwrap();
        lease.acquire(me).unwrap();
        let mut ran = false;
        assert_eq!(
            lease
                .release_if_unheld(|| {
                    ran = true;
                    true
                })
                .unwrap(),
            None
        );
        assert!(!ran);
        // Refused: the lease stays live.
        lease.acquire(me).unwrap();
        lease.release(me);
        lease.release(me);
        // A failed release keeps the lease, live.
        assert_eq!(lease.release_if_unheld(|| false).unwrap(), Some(false));
        assert!(!lease.is_revoked());
        assert_eq!(lease.release_if_unheld(|| true).unwrap(), Some(true));
        assert_eq!(
            Lease::open(&dir, lease.name()).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        assert_eq!(
            lease.acquire(me).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        std::fs::remove_dir(&dir).unwrap();
    }

    #[test]
    fn tables_of_dead_creators_are_swept() {
        let dir = scratch("sweep");
        let mine = Lease::create(&dir).unwrap();
        // A table whose creator no longer exists.
        let orphan = Table::create(&dir).unwrap();
        orphan.header(H_CREATOR_PID).store(0x7fff_fff0, SeqCst);
        std::fs::write(dir.join(format!("{PREFIX}zz")), "not a table").unwrap();
        assert_eq!(sweep_orphans(&dir).unwrap(), 1);
        assert!(!orphan.path.exists());
        assert_eq!(sweep_orphans(&dir).unwrap(), 0);
        mine.remove().unwrap();
        std::fs::remove_file(dir.join(format!("{PREFIX}zz"))).unwrap();
        std::fs::remove_dir(&dir).unwrap();
    }

    #[test]
    fn held_leases_hold_no_file_descriptors() {
        let dir = scratch("fds");
        let me = ProcessIdentity::current().unwrap();
        let fds = || std::fs::read_dir("/proc/self/fd").unwrap().count();
        let before = fds();
        let leases: Vec<Lease> = (0..300)
            .map(|_| {
                let lease = Lease::create(&dir).unwrap();
                let held = Lease::open(&dir, lease.name()).unwrap();
                held.acquire(me).unwrap();
                lease
            })
            .collect();
        // Other tests may open a few files meanwhile; 300 leases must not show up.
        assert!(
            fds() < before + 50,
            "leases keep descriptors open: {before} -> {}",
            fds()
        );
        for lease in leases {
            lease.release(me);
            lease.remove().unwrap();
        }
        std::fs::remove_dir(&dir).unwrap();
    }

    #[test]
    fn a_full_table_spills_into_another() {
        let dir = scratch("full");
        let leases: Vec<Lease> = (0..ENTRIES + 1)
            .map(|_| Lease::create(&dir).unwrap())
            .collect();
        assert_eq!(tables(&dir), 2);
        for lease in &leases {
            lease.remove().unwrap();
        }
        assert_eq!(tables(&dir), 0);
        std::fs::remove_dir(&dir).unwrap();
    }

    /// An exporter that removes a lease someone still holds (it forgets an object it
    /// could not release) must not hand its entry to the next lease: the old holder's
    /// late release would lower the new lease's count, and the new object would be
    /// released under its importer.
    #[test]
    fn a_late_release_of_a_removed_lease_never_touches_the_next_lease() {
        let dir = scratch("zombie");
        let me = ProcessIdentity::current().unwrap();
        let old = Lease::create(&dir).unwrap();
        let _keep = Lease::create(&dir).unwrap(); // keeps the table alive
        old.acquire(me).unwrap();
        old.remove().unwrap();
        let new = Lease::create(&dir).unwrap();
        new.acquire(me).unwrap();
        old.release(me);
        assert!(!new.is_unheld(false), "the new lease lost its hold");
        assert_eq!(new.live_holders(), 1);
        new.release(me);
        assert!(new.is_unheld(false));
        // Once nobody holds the old lease, its entry is reused (when the table is full).
        new.remove().unwrap();
    }

    /// Holder slots of killed importers are reclaimed by the next importer that needs
    /// one, not only by the exporter's scans: a loop of killed importers cannot fill the
    /// table while the exporter keeps its object.
    #[test]
    fn slots_of_dead_holders_are_reclaimed_when_the_table_is_full() {
        let dir = scratch("full-slots");
        let lease = Lease::create(&dir).unwrap();
        let dead_pid = {
            let mut child = std::process::Command::new("true").spawn().unwrap();
            let pid = child.id() as i32;
            child.wait().unwrap();
            pid
        };
        for i in 0..u64::from(SLOTS) {
            let ghost = ProcessIdentity {
                pid: dead_pid,
                start_time: i,
            };
            lease.acquire(ghost).unwrap();
        }
        let me = ProcessIdentity::current().unwrap();
        lease
            .acquire(me)
            .expect("a live importer gets a slot of a dead one");
        assert_eq!(lease.live_holders(), 1);
        lease.release(me);
    }

    /// A holder count at its maximum (only a corrupted table gets there) refuses the
    /// next hold instead of wrapping to 0, which the exporter would read as "unheld".
    #[test]
    fn the_holder_count_never_wraps_to_unheld() {
        let dir = scratch("wrap");
        let lease = Lease::create(&dir).unwrap();
        lease
            .table
            .entry(lease.index, E_HOLDERS)
            .store(u32::MAX, SeqCst);
        let me = ProcessIdentity::current().unwrap();
        let err = lease.acquire(me).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{err}");
        assert!(!lease.is_unheld(false));
        assert_eq!(lease.live_holders(), 0, "the refused hold left no slot");
        lease.remove().unwrap();
    }

    #[test]
    fn malformed_names_are_errors() {
        let dir = scratch("bad");
        for name in [&b"../x"[..], &[b'g'; NAME_LEN][..], &[b'f'; NAME_LEN][..]] {
            assert_eq!(
                Lease::open(&dir, name).unwrap_err().kind(),
                io::ErrorKind::InvalidInput,
                "{name:?}"
            );
        }
        // Well-formed, but no such table.
        assert_eq!(
            Lease::open(&dir, &encode(1, 0, 1)).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        std::fs::remove_dir(&dir).unwrap();
    }
}
