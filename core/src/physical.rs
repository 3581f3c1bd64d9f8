//! Which physical device a device index names.
//!
//! A [`DeviceId`](crate::DeviceId) is an index into the devices *this process* sees, and
//! frameworks narrow that view per worker (`HIP_VISIBLE_DEVICES`, `ROCR_VISIBLE_DEVICES`,
//! `CUDA_VISIBLE_DEVICES` under HIP, `ASCEND_RT_VISIBLE_DEVICES`): producer device 1 may
//! be consumer device 0. A [`PhysicalDevice`] names the device itself, the same in every
//! process on the host and under every mask, so tokens carry it and an importer finds its
//! own index of the exporter's device.
//!
//! What a runtime can tell differs: HIP gives the PCI bus id (`hipDeviceGetPCIBusId`) and,
//! from ROCm 5.1, a UUID (`hipDeviceGetUuid`); Ascend gives the physical chip id (user id →
//! logical id → physical id, CANN 8.x) and, in newer CANN, a UUID (`aclrtDeviceGetUuid`).
//! Every field is optional, and two identities are compared on the fields both know.

use std::fmt;
use std::str::FromStr;

use crate::backend_kind::BackendKind;
use crate::error::{Error, Result};

/// A PCI address, `domain:bus:device.function`, as `hipDeviceGetPCIBusId` prints it
/// (`0000:03:00.0`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PciBusId {
    /// PCI domain (segment).
    pub domain: u32,
    /// Bus number.
    pub bus: u8,
    /// Device number, 0..=31.
    pub device: u8,
    /// Function number, 0..=7.
    pub function: u8,
}

impl PciBusId {
    /// Checks the device and function numbers.
    pub fn new(domain: u32, bus: u8, device: u8, function: u8) -> Result<Self> {
        if device > 31 || function > 7 {
            return Err(Error::invalid_argument(format!(
                "PCI device {device} / function {function} out of range (device 0..=31, \
                 function 0..=7)"
            )));
        }
        Ok(PciBusId {
            domain,
            bus,
            device,
            function,
        })
    }
}

impl fmt::Display for PciBusId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04x}:{:02x}:{:02x}.{:x}",
            self.domain, self.bus, self.device, self.function
        )
    }
}

impl FromStr for PciBusId {
    type Err = Error;

    /// Parses `domain:bus:device.function` or `bus:device.function` (domain 0), in hex,
    /// either case: the forms `lspci` and the runtimes print.
    fn from_str(s: &str) -> Result<Self> {
        let bad = || {
            Error::invalid_argument(format!(
                "`{s}` is not a PCI bus id (expected domain:bus:device.function in hex, \
                 e.g. 0000:03:00.0)"
            ))
        };
        let hex32 = |t: &str, max_len: usize| {
            if t.is_empty() || t.len() > max_len || !t.bytes().all(|b| b.is_ascii_hexdigit()) {
                None
            } else {
                u32::from_str_radix(t, 16).ok()
            }
        };
        let (head, function) = s.trim().rsplit_once('.').ok_or_else(bad)?;
        let parts: Vec<&str> = head.split(':').collect();
        let (domain, bus, device) = match parts[..] {
            [domain, bus, device] => (hex32(domain, 8), hex32(bus, 2), hex32(device, 2)),
            [bus, device] => (Some(0), hex32(bus, 2), hex32(device, 2)),
            _ => return Err(bad()),
        };
        let function = hex32(function, 1);
        match (domain, bus, device, function) {
            (Some(d), Some(b), Some(dev), Some(f)) => {
                PciBusId::new(d, b as u8, dev as u8, f as u8).map_err(|_| bad())
            }
            _ => Err(bad()),
        }
    }
}

/// A device UUID as the runtime reports it (16 bytes; `hipUUID`, `aclrtUuid`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeviceUuid(pub [u8; 16]);

impl DeviceUuid {
    /// The runtime's 16 bytes, or `None` when they are all zero: runtimes fill zeros for
    /// a device without a UUID, and zeros must never make two devices look equal.
    pub fn from_runtime(bytes: [u8; 16]) -> Option<Self> {
        (bytes != [0; 16]).then_some(DeviceUuid(bytes))
    }
}

impl fmt::Display for DeviceUuid {
    /// `8-4-4-4-12` lowercase hex of the raw bytes; AMD's, which are 16 ASCII hex digits
    /// (CLR copies the digits after `GPU-` of the agent's UUID), as `GPU-<digits>`, the
    /// form `rocm-smi` prints and `ROCR_VISIBLE_DEVICES` accepts.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.iter().all(u8::is_ascii_hexdigit) {
            f.write_str("GPU-")?;
            return f.write_str(&String::from_utf8_lossy(&self.0));
        }
        for (i, b) in self.0.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                f.write_str("-")?;
            }
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

/// The physical identity of a device: what stays the same for one device in every process
/// on the host, whatever visibility mask each process runs under.
///
/// Fields a runtime cannot tell are `None`; [`PhysicalDevice::UNKNOWN`] knows nothing
/// (tokens of format version 2, or a runtime without the identity calls).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PhysicalDevice {
    /// PCI address (HIP).
    pub pci_bus_id: Option<PciBusId>,
    /// Device UUID (HIP from ROCm 5.1; Ascend where `aclrtDeviceGetUuid` exists).
    pub uuid: Option<DeviceUuid>,
    /// Physical chip id (Ascend, `aclrtGetPhyDevIdByLogicDevId`).
    pub physical_id: Option<u32>,
}

impl PhysicalDevice {
    /// An identity that knows nothing.
    pub const UNKNOWN: PhysicalDevice = PhysicalDevice {
        pci_bus_id: None,
        uuid: None,
        physical_id: None,
    };

    /// Whether any field is known.
    pub fn is_known(&self) -> bool {
        self.pci_bus_id.is_some() || self.uuid.is_some() || self.physical_id.is_some()
    }

    /// Whether `self` and `other` name the same device: `Some(true)` when they agree on
    /// every field both know, `Some(false)` when they differ on one, `None` when they
    /// share no known field (nothing can be said).
    pub fn same_device(&self, other: &PhysicalDevice) -> Option<bool> {
        fn field<T: PartialEq>(a: &Option<T>, b: &Option<T>) -> Option<bool> {
            Some(a.as_ref()? == b.as_ref()?)
        }
        let compared = [
            field(&self.uuid, &other.uuid),
            field(&self.pci_bus_id, &other.pci_bus_id),
            field(&self.physical_id, &other.physical_id),
        ];
        compared
            .into_iter()
            .flatten()
            .reduce(|all, this| all && this)
    }
}

impl fmt::Display for PhysicalDevice {
    /// E.g. `pci 0000:03:00.0, uuid 0123…`, `physical id 3`, or `unknown`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(pci) = self.pci_bus_id {
            parts.push(format!("pci {pci}"));
        }
        if let Some(id) = self.physical_id {
            parts.push(format!("physical id {id}"));
        }
        if let Some(uuid) = self.uuid {
            parts.push(format!("uuid {uuid}"));
        }
        if parts.is_empty() {
            f.write_str("unknown")
        } else {
            f.write_str(&parts.join(", "))
        }
    }
}

/// The physical identities of a backend's devices, asked of the runtime once per device
/// (a device's identity does not change while the process runs) and cached.
#[derive(Debug, Default)]
pub struct PhysicalDeviceCache {
    slots: Vec<std::sync::OnceLock<PhysicalDevice>>,
}

impl PhysicalDeviceCache {
    /// A cache for devices `0..count`.
    pub fn new(count: u32) -> Self {
        PhysicalDeviceCache {
            slots: (0..count).map(|_| std::sync::OnceLock::new()).collect(),
        }
    }

    /// The identity of `device`, from the cache or from `query` (whose errors are returned
    /// and not cached). A device outside `0..count` is queried every time.
    pub fn get_or_query(
        &self,
        device: crate::ids::DeviceId,
        query: impl FnOnce() -> Result<PhysicalDevice>,
    ) -> Result<PhysicalDevice> {
        let Some(slot) = usize::try_from(device.0)
            .ok()
            .and_then(|i| self.slots.get(i))
        else {
            return query();
        };
        if let Some(known) = slot.get() {
            return Ok(*known);
        }
        let queried = query()?;
        Ok(*slot.get_or_init(|| queried))
    }
}

/// The environment variables that narrow and renumber the devices a `backend` process
/// sees, in the order the runtime applies them (HIP: ROCr's mask first, then HIP's own,
/// where `HIP_VISIBLE_DEVICES` wins over `CUDA_VISIBLE_DEVICES`).
pub const fn visibility_env_vars(backend: BackendKind) -> &'static [&'static str] {
    match backend {
        BackendKind::Hip => &[
            "ROCR_VISIBLE_DEVICES",
            "HIP_VISIBLE_DEVICES",
            "CUDA_VISIBLE_DEVICES",
        ],
        BackendKind::Ascend => &["ASCEND_RT_VISIBLE_DEVICES"],
    }
}

/// The visibility variables of `backend` that are set in this process, as `NAME=value`
/// (empty values included: an empty mask hides every device on some runtimes).
pub fn visibility_in_force(backend: BackendKind) -> Vec<String> {
    visibility_env_vars(backend)
        .iter()
        .filter_map(|name| {
            std::env::var_os(name).map(|v| format!("{name}={}", v.to_string_lossy()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pci_bus_ids_parse_and_print_as_the_runtimes_do() {
        let id: PciBusId = "0000:03:00.0".parse().unwrap();
        assert_eq!(id, PciBusId::new(0, 3, 0, 0).unwrap());
        assert_eq!(id.to_string(), "0000:03:00.0");
        let id: PciBusId = "1A2B:C3:1f.7".parse().unwrap();
        assert_eq!(
            (id.domain, id.bus, id.device, id.function),
            (0x1a2b, 0xc3, 31, 7)
        );
        assert_eq!(id.to_string(), "1a2b:c3:1f.7");
        assert_eq!("c3:1f.7".parse::<PciBusId>().unwrap().domain, 0);
        for bad in [
            "",
            "0000:03:00",
            "0000:03:20.0",
            "0000:03:00.8",
            "0000:103:00.0",
            "0000:03:00.0.0",
            "x:03:00.0",
            "0000:03:+1.0",
            "1:2:3:4.0",
        ] {
            assert!(
                matches!(bad.parse::<PciBusId>(), Err(Error::InvalidArgument { .. })),
                "{bad:?} parsed"
            );
        }
    }

    #[test]
    fn identities_compare_on_the_fields_both_know() {
        let pci = |b| Some(PciBusId::new(0, b, 0, 0).unwrap());
        let uuid = |b| Some(DeviceUuid([b; 16]));
        let a = PhysicalDevice {
            pci_bus_id: pci(3),
            uuid: uuid(1),
            physical_id: None,
        };
        let same_pci_no_uuid = PhysicalDevice { uuid: None, ..a };
        assert_eq!(a.same_device(&a), Some(true));
        assert_eq!(a.same_device(&same_pci_no_uuid), Some(true));
        let other_uuid = PhysicalDevice { uuid: uuid(2), ..a };
        assert_eq!(a.same_device(&other_uuid), Some(false));
        let other_pci = PhysicalDevice {
            pci_bus_id: pci(4),
            ..a
        };
        assert_eq!(a.same_device(&other_pci), Some(false));
        let chip = PhysicalDevice {
            physical_id: Some(3),
            ..PhysicalDevice::UNKNOWN
        };
        assert_eq!(a.same_device(&chip), None);
        assert_eq!(PhysicalDevice::UNKNOWN.same_device(&a), None);
        assert!(!PhysicalDevice::UNKNOWN.is_known() && chip.is_known());
    }

    #[test]
    fn the_cache_asks_once_per_device_and_never_caches_errors() {
        use crate::ids::DeviceId;
        let cache = PhysicalDeviceCache::new(2);
        let calls = std::cell::Cell::new(0);
        let chip = |id| {
            calls.set(calls.get() + 1);
            Ok(PhysicalDevice {
                physical_id: Some(id),
                ..PhysicalDevice::UNKNOWN
            })
        };
        assert!(
            cache
                .get_or_query(DeviceId(1), || Err(Error::invalid_argument("flaky")))
                .is_err()
        );
        assert_eq!(
            cache
                .get_or_query(DeviceId(1), || chip(7))
                .unwrap()
                .physical_id,
            Some(7)
        );
        assert_eq!(
            cache
                .get_or_query(DeviceId(1), || chip(8))
                .unwrap()
                .physical_id,
            Some(7)
        );
        assert_eq!(calls.get(), 1);
        // Outside the cache: asked every time.
        cache.get_or_query(DeviceId(5), || chip(5)).unwrap();
        cache.get_or_query(DeviceId(5), || chip(5)).unwrap();
        assert_eq!(calls.get(), 3);
    }

    #[test]
    fn zero_uuids_are_unknown_and_uuids_print_as_uuids() {
        assert_eq!(DeviceUuid::from_runtime([0; 16]), None);
        let mut bytes = [0u8; 16];
        bytes[0] = 0xab;
        bytes[15] = 1;
        let uuid = DeviceUuid::from_runtime(bytes).unwrap();
        assert_eq!(uuid.to_string(), "ab000000-0000-0000-0000-000000000001");
        let shown = PhysicalDevice {
            pci_bus_id: Some(PciBusId::new(0, 0x13, 0, 0).unwrap()),
            uuid: Some(uuid),
            physical_id: Some(3),
        }
        .to_string();
        assert_eq!(
            shown,
            "pci 0000:13:00.0, physical id 3, uuid ab000000-0000-0000-0000-000000000001"
        );
        assert_eq!(PhysicalDevice::UNKNOWN.to_string(), "unknown");
        assert_eq!(
            DeviceUuid(*b"3840496393a4dfc5").to_string(),
            "GPU-3840496393a4dfc5"
        );
    }
}
