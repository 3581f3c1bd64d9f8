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
//! An acquire writes its slot, checks the status is live, increments `holders`, and only
//! then re-reads the status (undoing everything when it is not live any more); the exporter stores "revoked" and
//! only then reads `holders` (and, to discount dead holders, the slots). All of these are
//! sequentially consistent, so at least one side sees the other: either the acquire
//! fails, or the exporter sees the hold and waits. An exporter that sees `holders == 0`
//! after revoking may release at once; `holders > 0` may include holders that died, which
//! only a scan of the slots (with liveness checks in `/proc`) tells apart.
//!
//! The table is unlinked when its creator has removed every lease in it; a table left by
//! a killed exporter is removed by [`sweep_orphans`] in the next process.
//!
//! # Fork
//!
//! The registry of this process's tables and its holds are per process: a `fork`ed child
//! starts with none (it creates its own table, never hands out its parent's entries, and
//! releasing "its" holds releases none of its parent's), and it cannot revoke or remove a
//! lease of a table its parent created.
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

use std::io;
use std::path::Path;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::process::ProcessIdentity;
use crate::word_file::NAME_LEN;
use table::{
    E_GEN_HI, E_GEN_LO, E_HOLDERS, E_STATUS, E_TAG_HI, E_TAG_LO, FREE, H_CREATOR_PID,
    H_CREATOR_PID_NS, H_CREATOR_START_HI, H_CREATOR_START_LO, H_WAKE, HOLDS, LIVE, PREFIX,
    REGISTRY, REVOKED, S_COUNT, S_TAG, SEQ_MASK, Table, table, table_creator,
};
pub use table::{ENTRIES, SLOTS};

pub mod held;
#[cfg(test)]
mod reuse_tests;
mod table;
#[cfg(test)]
mod tests;

/// A test's hook into [`Lease::acquire_for`], to force interleavings: run on the acquiring
/// thread after the slot is claimed ([`hook::Step::Claimed`]) and after the count grew
/// ([`hook::Step::Counted`]).
#[cfg(test)]
pub(crate) mod hook {
    use std::cell::RefCell;

    use crate::process::ProcessIdentity;

    /// Where the acquire is.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(crate) enum Step {
        Claimed,
        Counted,
    }

    type Hook = Box<dyn FnMut(Step, ProcessIdentity)>;

    thread_local! {
        static HOOK: RefCell<Option<Hook>> = const { RefCell::new(None) };
    }

    /// Sets this thread's hook (`None` removes it).
    pub(crate) fn set(hook: Option<Hook>) {
        HOOK.with(|h| *h.borrow_mut() = hook);
    }

    /// Runs this thread's hook, if any; acquires inside it run without it.
    pub(crate) fn run(step: Step, who: ProcessIdentity) {
        let Some(mut hook) = HOOK.with(|h| h.borrow_mut().take()) else {
            return;
        };
        hook(step, who);
        HOOK.with(|h| {
            let mut h = h.borrow_mut();
            if h.is_none() {
                *h = Some(hook);
            }
        });
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn gone(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, what.to_owned())
}

/// What an importer expects of a lease, from its token (see [`Lease::acquire_for`]);
/// `None` fields are not checked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Binding {
    /// The object's generation.
    pub generation: Option<u64>,
    /// The exporter's tag for the object (see [`Lease::create_tagged`]).
    pub tag: Option<u64>,
    /// The exporter: the process that created the lease's table (its pid namespace is
    /// compared only when known, i.e. not 0).
    pub creator: Option<ProcessIdentity>,
}

/// Whether `a` and `b` name the same process: the same pid and start time, and the same
/// pid namespace unless either does not say (a token's producer may not know it).
fn same_process(a: &ProcessIdentity, b: &ProcessIdentity) -> bool {
    a.pid == b.pid
        && a.start_time == b.start_time
        && (a.pid_ns == 0 || b.pid_ns == 0 || a.pid_ns == b.pid_ns)
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
        let mut reg = REGISTRY.lock();
        let mut picked = None;
        for t in reg.own.iter().filter(|t| t.dir() == Some(dir)) {
            let Some(own) = &t.own else { continue };
            let mut own = lock(own);
            if own.unlinked {
                continue;
            }
            if let Some(index) = own.pick(t) {
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
        // No slot names the entry (`Own::pick`), so no late acquire or release of its old
        // lease can change the counter any more: what is left in it is the holds of
        // processes that died.
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
            pid_ns: self.table.header(H_CREATOR_PID_NS).load(SeqCst),
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
            && !same_process(&creator, &self.creator())
        {
            let (made, named) = (self.creator(), creator);
            return mismatch(format!(
                "the token's lease belongs to another exporter (pid {}, started at {}) than \
                 the token's producer (pid {}, started at {}){}",
                made.pid,
                made.start_time,
                named.pid,
                named.start_time,
                if made.pid == named.pid {
                    ": the pid was reused, or the token's start time edited"
                } else {
                    ""
                }
            ));
        }
        let t = &self.table;
        if crate::liveness::is_me(&who) {
            // Before the slot names us: processes of other pid namespaces (the exporter's
            // scans) judge us by our beacon in the table's directory.
            if let Some(dir) = t.dir() {
                crate::liveness::announce(dir)?;
            }
        }
        {
            let mut holds = HOLDS.lock();
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
        #[cfg(test)]
        hook::run(hook::Step::Claimed, who);
        // The slot names the entry before this check, and the count grows only after it:
        // an entry removed meanwhile is not reused while the slot exists, and one removed
        // before is not counted into (see `table::Own`).
        if self.state() != Some(LIVE) {
            self.release_slot_only(who);
            return Err(revoked());
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
        #[cfg(test)]
        hook::run(hook::Step::Counted, who);
        if self.state() != Some(LIVE) {
            self.release(who);
            return Err(revoked());
        }
        Ok(())
    }

    /// Undoes the slot part of a hold whose count could not be raised.
    fn release_slot_only(&self, who: ProcessIdentity) {
        let t = &self.table;
        let mut holds = HOLDS.lock();
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
            let mut holds = HOLDS.lock();
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
                    // The entry is not reused while our slot names it (see
                    // `table::Own`), so this is still our lease's count.
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

    /// Revokes the lease: every later acquire fails. Returns whether it was live. A forked
    /// child cannot revoke its parent's lease (it returns `false`, changing nothing).
    pub fn revoke(&self) -> bool {
        if self.table.inherited() {
            return false;
        }
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
        self.not_inherited()?;
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

    /// Refuses to end a lease of the parent this process was forked from: the parent
    /// still exports the object, and decides when it is released.
    fn not_inherited(&self) -> io::Result<()> {
        if self.table.inherited() {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "the lease belongs to the process this one was forked from: a forked child \
                 cannot revoke, release or remove it",
            ));
        }
        Ok(())
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
    /// A forked child cannot remove its parent's lease (`PermissionDenied`).
    pub fn remove(&self) -> io::Result<()> {
        self.not_inherited()?;
        let status = self.table.entry(self.index, E_STATUS);
        let removed = [LIVE, REVOKED].into_iter().any(|state| {
            status
                .compare_exchange(self.seq << 2 | state, self.seq << 2 | FREE, SeqCst, SeqCst)
                .is_ok()
        });
        if !removed {
            return Ok(());
        }
        let Some(own) = &self.table.own else {
            return Ok(());
        };
        let unlink = {
            let mut own = lock(own);
            // Reused once no slot names it: a holder (an exporter may forget a lease it
            // could not release) or a late acquirer may still count on the entry.
            own.retired.push(self.index);
            own.used = own.used.saturating_sub(1);
            let unlink = own.used == 0 && !own.unlinked;
            if unlink {
                own.unlinked = true;
            }
            unlink
        };
        if unlink {
            let _ = std::fs::remove_file(&self.table.path);
            REGISTRY.lock().own.retain(|t| !Arc::ptr_eq(t, &self.table));
        }
        Ok(())
    }
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
        if creator.is_alive_in(dir) {
            return Ok(false);
        }
        std::fs::remove_file(&path)?;
        Ok(true)
    })
    .inspect(|_| {
        // The beacons of the processes that are gone, after what they recorded.
        let _ = crate::liveness::sweep(dir);
    })
}
