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

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::{Mutex, MutexGuard};

use crate::error::{Error, Result};
use crate::ids::{DeviceId, DevicePtr};

/// Start address to (size, device) of every registered block.
static BLOCKS: Mutex<BTreeMap<u64, (usize, DeviceId)>> = Mutex::new(BTreeMap::new());

fn blocks() -> MutexGuard<'static, BTreeMap<u64, (usize, DeviceId)>> {
    BLOCKS.lock().unwrap_or_else(|p| p.into_inner())
}

/// Records `size` bytes at `base` on `device`, just allocated by a backend.
pub fn register(base: DevicePtr, size: usize, device: DeviceId) {
    blocks().insert(base.0, (size, device));
}

/// Forgets the block at `base` once the vendor freed it (a block never registered is
/// ignored).
pub fn unregister(base: DevicePtr) {
    blocks().remove(&base.0);
}

/// The registered block overlapping `span`, as (base, size, device).
pub fn overlapping(span: Range<u64>) -> Option<(DevicePtr, usize, DeviceId)> {
    // Blocks never overlap each other: the one starting last before the span's end is
    // the only candidate.
    let blocks = blocks();
    let (&base, &(size, device)) = blocks.range(..span.end).next_back()?;
    (base.saturating_add(size as u64) > span.start).then_some((DevicePtr(base), size, device))
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
        register(DevicePtr(a), 4096, DeviceId(0));
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
        unregister(DevicePtr(a));
        assert_eq!(overlapping(a..a + 4096), None);
        unregister(DevicePtr(b));
        unregister(DevicePtr(b));
        assert!(check_not_own(DevicePtr(b), 8192).is_ok());
    }
}
