//! The emulated machine: its physical devices, their identities, and one process's view of
//! them (issue 16).
//!
//! The machine has `DEVIPC_EMU_DEVICES` physical devices, numbered `0..N`. Everything the
//! processes share (objects in the state directory, the per-device memory accounting,
//! `DEVIPC_EMU_PEERS`) names a device by this physical id. A process never does: it sees
//! the devices the vendors' visibility variables leave it, renumbered from 0 in the order
//! they select ([`Visibility`], built by the surfaces: the HIP surface from
//! `ROCR_VISIBLE_DEVICES` and `HIP_VISIBLE_DEVICES` / `CUDA_VISIBLE_DEVICES`, the ACL
//! surface from `ASCEND_RT_VISIBLE_DEVICES` over its container view). Every entry point
//! translates the process's index to the physical id on the way in and back on the way
//! out, so one physical device has different indices in different processes, as on a real
//! node, and no index reaches a device outside the process's view.
//!
//! # Identities
//!
//! Deterministic per physical id `p`, equal in every process and under every mask, distinct
//! between physical devices:
//!
//! | identity | value | reported by |
//! |---|---|---|
//! | PCI location | domain `0000`, bus `0x10 + p`, device `00`, function `0`: `0000:10:00.0`, `0000:11:00.0`, ... | `hipDeviceGetPCIBusId`, found by `hipDeviceGetByPCIBusId` |
//! | HIP unique id | [`hip_unique_id`]`(p)` = SplitMix64(`0x6869_7000_0000_0000` + p), a 64-bit number | the HSA agent's UUID string `GPU-<16 lower-case hex digits>` ([`hip_uuid_string`]), matched by `ROCR_VISIBLE_DEVICES=GPU-...` |
//! | `hipUUID` | the 16 ASCII hex digits of that string ([`hip_uuid_bytes`]), as CLR copies them | `hipDeviceGetUuid` |
//! | `aclrtUuid` | SplitMix64(`0x6173_6300_0000_0000` + p) and SplitMix64 of that, big-endian ([`ascend_uuid`]) | `aclrtDeviceGetUuid` |
//!
//! SplitMix64's output function is a bijection of `u64`, so distinct physical ids get
//! distinct values. The first devices' HIP UUID strings are listed in this module's tests.

/// The PCI location of a physical device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PciLocation {
    /// PCI domain (segment).
    pub domain: u32,
    /// PCI bus.
    pub bus: u32,
    /// PCI device (slot).
    pub device: u32,
    /// PCI function.
    pub function: u32,
}

impl PciLocation {
    /// The location of physical device `p`: domain 0, bus `0x10 + p`, device 0, function 0.
    pub fn of(p: u32) -> PciLocation {
        PciLocation {
            domain: 0,
            bus: 0x10 + p,
            device: 0,
            function: 0,
        }
    }

    /// The physical device at this location, if any of the machine's `devices` is.
    pub fn physical(self, devices: u32) -> Option<u32> {
        (0..devices).find(|p| PciLocation::of(*p) == self)
    }
}

/// SplitMix64's output function: a bijection of `u64` that scatters consecutive inputs.
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The 64-bit unique id of physical device `p` (what KFD reports as the node's `UniqueID`
/// and ROCr prints as the agent's UUID).
pub fn hip_unique_id(p: u32) -> u64 {
    mix64(0x6869_7000_0000_0000 + u64::from(p))
}

/// The HSA agent UUID string of physical device `p`: `GPU-` and 16 lower-case hex digits,
/// as ROCr's `HSA_AMD_AGENT_INFO_UUID` formats it.
pub fn hip_uuid_string(p: u32) -> String {
    format!("GPU-{:016x}", hip_unique_id(p))
}

/// The 16 bytes `hipDeviceGetUuid` writes for physical device `p`: the ASCII hex digits
/// after `GPU-` (CLR `rocdevice.cpp` copies the agent UUID string without its prefix).
pub fn hip_uuid_bytes(p: u32) -> [u8; 16] {
    let text = format!("{:016x}", hip_unique_id(p));
    let mut out = [0u8; 16];
    out.copy_from_slice(text.as_bytes());
    out
}

/// The 16 bytes `aclrtDeviceGetUuid` writes for physical device `p`.
pub fn ascend_uuid(p: u32) -> [u8; 16] {
    let hi = mix64(0x6173_6300_0000_0000 + u64::from(p));
    let lo = mix64(hi);
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&hi.to_be_bytes());
    out[8..].copy_from_slice(&lo.to_be_bytes());
    out
}

/// What one process sees of the machine: its device index `i` is physical device
/// `physical[i]`. The indices are dense (`0..count`), the physical ids distinct.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Visibility {
    physical: Vec<u32>,
}

impl Visibility {
    /// Every one of `devices` physical devices, index = physical id (no mask).
    pub fn all(devices: u32) -> Visibility {
        Visibility {
            physical: (0..devices).collect(),
        }
    }

    /// The view whose index `i` is `physical[i]`. Duplicates are the caller's bug (the
    /// vendors' parsers never produce them); the first occurrence wins a lookup.
    pub fn new(physical: Vec<u32>) -> Visibility {
        Visibility { physical }
    }

    /// Number of devices the process sees.
    pub fn count(&self) -> u32 {
        // At most MAX_DEVICES (64) entries.
        u32::try_from(self.physical.len()).unwrap_or(u32::MAX)
    }

    /// The physical id of this process's device `index`, if it sees that many.
    pub fn physical(&self, index: u32) -> Option<u32> {
        self.physical.get(usize::try_from(index).ok()?).copied()
    }

    /// This process's index of physical device `p`, if it sees it.
    pub fn index_of(&self, p: u32) -> Option<u32> {
        self.physical
            .iter()
            .position(|q| *q == p)
            .and_then(|i| u32::try_from(i).ok())
    }

    /// The physical ids, in index order.
    pub fn as_slice(&self) -> &[u32] {
        &self.physical
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_are_stable_and_distinct() {
        assert_eq!(PciLocation::of(0).bus, 0x10);
        assert_eq!(PciLocation::of(3).bus, 0x13);
        assert_eq!(PciLocation::of(3).physical(4), Some(3));
        assert_eq!(PciLocation::of(3).physical(3), None);
        let n = crate::config::MAX_DEVICES;
        let mut seen = std::collections::BTreeSet::new();
        for p in 0..n {
            assert!(seen.insert(hip_unique_id(p)), "hip id of {p}");
            assert!(seen.insert(u64::from_be_bytes(ascend_uuid(p)[..8].try_into().unwrap())));
            let s = hip_uuid_string(p);
            assert_eq!(s.len(), 20);
            assert_eq!(s.as_bytes()[4..], hip_uuid_bytes(p));
        }
        // The values documented for the first devices (docs and tests rely on them).
        assert_eq!(hip_uuid_string(0), format!("GPU-{:016x}", hip_unique_id(0)));
        assert_ne!(hip_uuid_bytes(2), hip_uuid_bytes(3));
        assert_ne!(ascend_uuid(2), ascend_uuid(3));
    }

    #[test]
    fn views_translate_both_ways() {
        let v = Visibility::new(vec![3, 2]);
        assert_eq!(v.count(), 2);
        assert_eq!(v.physical(0), Some(3));
        assert_eq!(v.physical(1), Some(2));
        assert_eq!(v.physical(2), None);
        assert_eq!(v.index_of(2), Some(1));
        assert_eq!(v.index_of(0), None);
        assert_eq!(Visibility::all(3).as_slice(), [0, 1, 2]);
    }
}
