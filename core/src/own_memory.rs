//! Every block of device memory devipc's backends allocated in this process, whichever
//! backend instance (`Runtime`) made it, until the vendor free ran.
//!
//! `export_external` is for memory a framework allocated: a token made that way carries
//! a lease of its own, so exporting devipc's own memory through it would let the
//! buffer's free (which waits only for the buffer's lease) pull the memory from that
//! token's importers. The check must see blocks of every backend instance in the process
//! (two `Runtime`s share the address space) and blocks whose free is deferred or under
//! way (their handle is gone, the memory is not), so it cannot use one backend's handle
//! table: backends register a block when it is allocated and unregister it when the
//! vendor has freed it.
//!
//! A registration is ended by the [`Registration`] it returned, not by its address: once
//! the vendor freed a block, another thread may get the same address from its next
//! allocation and register it before the first thread unregisters; removing "whatever is
//! at that address" would then delete the new block's registration (audit N4). The
//! address form ([`unregister`]) is only for callers that unregister while the address
//! is still theirs (before the vendor free).
//!
//! [`BlockMap`] is the registry's type, also usable by a backend for address ranges of
//! its own (e.g. the device to bind for copies to an import).

use crate::fork::{PerProcess, PerProcessGuard, forget_inherited};
use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};
use crate::ids::{DeviceId, DevicePtr};

/// One registered block.
#[derive(Debug, Clone, Copy)]
struct Block {
    size: usize,
    device: DeviceId,
    /// Which registration made it (see [`Registration`]).
    id: u64,
}

/// What [`BlockMap::register`] made: the block's base and a number no other registration
/// of the map has, so that [`BlockMap::unregister_exactly`] removes this registration and
/// never a later one of a block at the same address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Registration {
    base: u64,
    id: u64,
}

impl Registration {
    /// The block's base address.
    pub fn base(&self) -> DevicePtr {
        DevicePtr(self.base)
    }
}

/// Blocks of device memory by start address, each with its size and device. Blocks are
/// expected not to overlap (they are live allocations or mappings of one address space).
#[derive(Debug)]
pub struct BlockMap {
    /// Per process: a forked child's blocks are its own (its parent's are forgotten
    /// there), and it never waits for a lock a parent thread held at the fork.
    blocks: PerProcess<BTreeMap<u64, Block>>,
    next_id: AtomicU64,
}

impl Default for BlockMap {
    fn default() -> Self {
        BlockMap::new()
    }
}

impl BlockMap {
    /// An empty map (usable in a `static`).
    pub const fn new() -> BlockMap {
        BlockMap {
            blocks: PerProcess::new(forget_inherited),
            next_id: AtomicU64::new(1),
        }
    }

    fn blocks(&self) -> PerProcessGuard<'static, BTreeMap<u64, Block>> {
        self.blocks.lock()
    }

    /// Records `size` bytes at `base` on `device`. A block still registered at `base`
    /// (freed by the vendor, not yet unregistered by its owner) is replaced.
    pub fn register(&self, base: DevicePtr, size: usize, device: DeviceId) -> Registration {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.blocks().insert(base.0, Block { size, device, id });
        Registration { base: base.0, id }
    }

    /// Removes `registration`, and nothing else: a later registration at the same address
    /// stays. Returns whether it was still there.
    pub fn unregister_exactly(&self, registration: Registration) -> bool {
        let mut blocks = self.blocks();
        match blocks.get(&registration.base) {
            Some(b) if b.id == registration.id => {
                blocks.remove(&registration.base);
                true
            }
            _ => false,
        }
    }

    /// Removes whatever block is registered at `base`. Only for a caller that still owns
    /// the address (before the vendor freed it): afterwards it may be someone else's.
    pub fn unregister(&self, base: DevicePtr) {
        self.blocks().remove(&base.0);
    }

    /// The registered block overlapping `span`, as (base, size, device).
    pub fn overlapping(&self, span: Range<u64>) -> Option<(DevicePtr, usize, DeviceId)> {
        // Blocks never overlap each other: the one starting last before the span's end is
        // the only candidate.
        let blocks = self.blocks();
        let (&base, b) = blocks.range(..span.end).next_back()?;
        (base.saturating_add(b.size as u64) > span.start).then_some((
            DevicePtr(base),
            b.size,
            b.device,
        ))
    }
}

/// devipc's own blocks (see the module docs).
static OWN: BlockMap = BlockMap::new();

/// Records `size` bytes at `base` on `device`, just allocated by a backend. End it with
/// [`unregister_exactly`] once the vendor freed the block.
pub fn register(base: DevicePtr, size: usize, device: DeviceId) -> Registration {
    OWN.register(base, size, device)
}

/// Forgets exactly the block `registration` recorded (a later registration at the same
/// address, made after the vendor free, stays): call it after the vendor free.
pub fn unregister_exactly(registration: Registration) {
    OWN.unregister_exactly(registration);
}

/// Forgets the block at `base`, whoever registered it (a block never registered is
/// ignored). Only before the vendor free, while the address cannot be reused (Ascend
/// unregisters while the virtual range is still reserved); after it, use
/// [`unregister_exactly`].
pub fn unregister(base: DevicePtr) {
    OWN.unregister(base);
}

/// The registered block overlapping `span`, as (base, size, device).
pub fn overlapping(span: Range<u64>) -> Option<(DevicePtr, usize, DeviceId)> {
    OWN.overlapping(span)
}

/// Refuses an `export_external` of `len` bytes at `ptr` that overlaps a block of
/// devipc's own (see the module docs).
pub fn check_not_own(ptr: DevicePtr, len: usize) -> Result<()> {
    let end = ptr.0.saturating_add(len as u64);
    match overlapping(ptr.0..end) {
        None => Ok(()),
        Some((base, size, device)) => Err(Error::invalid_argument(format!(
            "{len} bytes at {ptr} lie in a devipc allocation ({size} bytes at {base} on \
             device {device}, of this or another runtime of this process): export that \
             buffer (SharedBuffer::export, or export_range for a part of it), whose free \
             waits for its importers; export_external is for memory a framework allocated"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlaps_are_found_at_either_end_and_gaps_are_not() {
        // Addresses no real block in the test process has (high, unmapped).
        let (a, b) = (0x7ff0_0000_0000u64, 0x7ff0_0010_0000u64);
        let ra = register(DevicePtr(a), 4096, DeviceId(0));
        register(DevicePtr(b), 8192, DeviceId(1));
        assert_eq!(
            overlapping(a..a + 1),
            Some((DevicePtr(a), 4096, DeviceId(0)))
        );
        assert_eq!(overlapping(a - 10..a + 1).map(|f| f.0), Some(DevicePtr(a)));
        assert_eq!(
            overlapping(a + 4095..a + 5000).map(|f| f.0),
            Some(DevicePtr(a))
        );
        assert_eq!(overlapping(a + 4096..b), None);
        assert_eq!(overlapping(a - 100..a), None);
        assert_eq!(
            overlapping(b + 8191..b + 9000).map(|f| f.2),
            Some(DeviceId(1))
        );
        assert!(check_not_own(DevicePtr(b + 100), 10).is_err());
        unregister_exactly(ra);
        assert_eq!(overlapping(a..a + 4096), None);
        unregister(DevicePtr(b));
        unregister(DevicePtr(b));
        assert!(check_not_own(DevicePtr(b), 8192).is_ok());
    }

    /// Audit N4: thread A's vendor free of X, thread B's allocation getting X again and
    /// registering it, then A's late unregister: B's block must stay registered.
    #[test]
    fn a_late_unregister_never_removes_a_reused_address() {
        let map = BlockMap::new();
        let x = DevicePtr(0x7ff1_0000_0000);
        let old = map.register(x, 4096, DeviceId(1));
        // (A: vendor free of X.) B: the allocator hands X out again.
        let new = map.register(x, 8192, DeviceId(1));
        // A: its unregister, after the free.
        assert!(!map.unregister_exactly(old), "the old registration is gone");
        assert_eq!(
            map.overlapping(x.0..x.0 + 1),
            Some((x, 8192, DeviceId(1))),
            "B's block stays registered"
        );
        assert!(map.unregister_exactly(new));
        assert_eq!(map.overlapping(x.0..x.0 + 1), None);
        // Twice is harmless.
        assert!(!map.unregister_exactly(new));
    }
}
