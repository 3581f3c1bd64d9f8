//! The physical identity of a device (issue 16): `hipDeviceGetPCIBusId`,
//! `hipDeviceGetByPCIBusId` and `hipDeviceGetUuid`.
//!
//! The identities are the emulated machine's ([`crate::machine`]): physical device `p`
//! sits at PCI `0000:<0x10+p>:00.0` and has the agent UUID `GPU-<16 hex digits>` whose
//! digits `hipDeviceGetUuid` returns. They are the same in every process, whatever its
//! visibility masks, so a device can be recognised across processes whose ordinals differ.
//!
//! Behaviour follows CLR `hipamd/src/hip_device_runtime.cpp` and `hip_device.cpp`:
//! - `hipDeviceGetPCIBusId(buf, len, d)`: no visible device at all gives `hipErrorNoDevice`,
//!   an ordinal out of range `hipErrorInvalidDevice`, a NULL buffer `hipErrorInvalidValue`
//!   (in that order); then `snprintf(buf, len, "%04x:%02x:%02x.0", domain, bus, device)`
//!   and `hipErrorInvalidValue` when `len <= 12` ([`rules::DEVICE_PCI_BUS_ID_LEN_CHECKED`]).
//!   A `len` of 0 or less writes nothing (C's `snprintf` would take a negative `len` as a
//!   huge size; the emulator does not write past a buffer it cannot see).
//! - `hipDeviceGetByPCIBusId(&d, text)`: NULL arguments are `hipErrorInvalidValue`; `text`
//!   is scanned as `sscanf("%04x:%02x:%02x")` does (leading white space before each
//!   number, an optional sign and `0x` prefix within the field width, upper or lower case;
//!   the function number and anything after the device are ignored), and compared with the
//!   devices this process sees: a hidden device, an absent one or text that does not scan
//!   is `hipErrorInvalidValue` ([`rules::DEVICE_BY_PCI_BUS_ID_VISIBLE_ONLY`]).
//! - `hipDeviceGetUuid(&u, d)`: an ordinal out of range is `hipErrorInvalidDevice`, checked
//!   before the NULL `u` (`hipErrorInvalidValue`).

use std::ffi::c_int;

use devipc_hip_sys::{hipErrorInvalidDevice, hipErrorInvalidValue, hipErrorNoDevice};

use super::errors::{Failure, HipResult};
use super::rules::{self, DEVICE_BY_PCI_BUS_ID_VISIBLE_ONLY};
use super::runtime::{config, physical_of, visible_count};
use super::visibility;
use crate::machine::{PciLocation, hip_uuid_bytes};

/// The text `hipDeviceGetPCIBusId` prints for ordinal `device` (without the NUL).
pub(crate) fn pci_bus_id(device: c_int) -> HipResult<String> {
    if visible_count()? == 0 {
        return Err(Failure::new(
            hipErrorNoDevice,
            "no emulated device visible (DEVIPC_EMU_DEVICES, ROCR_VISIBLE_DEVICES, \
             HIP_VISIBLE_DEVICES)",
        ));
    }
    let p = physical_of(device).ok_or_else(|| {
        Failure::new(
            hipErrorInvalidDevice,
            format!("device {device} is not one of this process's devices"),
        )
    })?;
    let at = PciLocation::of(p);
    Ok(format!(
        "{:04x}:{:02x}:{:02x}.0",
        at.domain, at.bus, at.device
    ))
}

/// `hipDeviceGetByPCIBusId(text)`: this process's ordinal of the device at that bus id.
pub(crate) fn by_pci_bus_id(text: &[u8]) -> HipResult<c_int> {
    let shown = String::from_utf8_lossy(text).into_owned();
    let Some((domain, bus, device)) = scan_bus_id(text) else {
        return Err(Failure::invalid_value(format!(
            "{shown:?} does not scan as %04x:%02x:%02x (a PCI bus id such as 0000:10:00.0)"
        )));
    };
    let physical_count = config()?.devices;
    let view = visibility::view()?;
    let physical = (0..physical_count).find(|p| {
        let at = PciLocation::of(*p);
        (at.domain, at.bus, at.device) == (domain, bus, device)
    });
    match physical {
        Some(p) => match view.index_of(p) {
            Some(i) => Ok(i as c_int),
            None if !rules::enforced(DEVICE_BY_PCI_BUS_ID_VISIBLE_ONLY) => Ok(p as c_int),
            None => Err(Failure::rule(
                hipErrorInvalidValue,
                DEVICE_BY_PCI_BUS_ID_VISIBLE_ONLY,
                format!(
                    "{shown:?} is physical device {p}, which this process's masks hide \
                     (ROCR_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES)"
                ),
            )),
        },
        None => Err(Failure::rule(
            hipErrorInvalidValue,
            DEVICE_BY_PCI_BUS_ID_VISIBLE_ONLY,
            format!("{shown:?} is the bus id of no emulated device"),
        )),
    }
}

/// `hipDeviceGetUuid(device)`: the 16 bytes.
pub(crate) fn uuid(device: c_int) -> HipResult<[u8; 16]> {
    let p = physical_of(device).ok_or_else(|| {
        Failure::new(
            hipErrorInvalidDevice,
            format!("device {device} is not one of this process's devices"),
        )
    })?;
    Ok(hip_uuid_bytes(p))
}

/// `sscanf(text, "%04x:%02x:%02x", &a, &b, &c) == 3`, with the values as `unsigned int`.
pub(crate) fn scan_bus_id(text: &[u8]) -> Option<(u32, u32, u32)> {
    let mut at = 0;
    let domain = scan_hex(text, &mut at, 4)?;
    literal(text, &mut at, b':')?;
    let bus = scan_hex(text, &mut at, 2)?;
    literal(text, &mut at, b':')?;
    let device = scan_hex(text, &mut at, 2)?;
    Some((domain, bus, device))
}

/// A literal character of the format: must be next (no white space skipped).
fn literal(text: &[u8], at: &mut usize, c: u8) -> Option<()> {
    (text.get(*at) == Some(&c)).then(|| *at += 1)
}

/// One `%<width>x` conversion: white space skipped, then at most `width` characters of an
/// optional sign, an optional `0x`/`0X` and hexadecimal digits (at least one digit). The
/// value wraps to `unsigned int` as `strtoul`'s does.
fn scan_hex(text: &[u8], at: &mut usize, width: usize) -> Option<u32> {
    while text.get(*at).is_some_and(u8::is_ascii_whitespace) {
        *at += 1;
    }
    let field = &text[*at..text.len().min(*at + width)];
    let mut i = 0;
    let negative = match field.first() {
        Some(b'-') => {
            i = 1;
            true
        }
        Some(b'+') => {
            i = 1;
            false
        }
        _ => false,
    };
    if field.get(i) == Some(&b'0')
        && matches!(field.get(i + 1), Some(b'x' | b'X'))
        && field.get(i + 2).is_some_and(u8::is_ascii_hexdigit)
    {
        i += 2;
    }
    let start = i;
    let mut value: u32 = 0;
    while let Some(d) = field.get(i).and_then(|b| (*b as char).to_digit(16)) {
        value = value.wrapping_mul(16).wrapping_add(d);
        i += 1;
    }
    if i == start {
        return None;
    }
    *at += i;
    Some(if negative {
        value.wrapping_neg()
    } else {
        value
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scans_like_sscanf() {
        let s = |t: &str| scan_bus_id(t.as_bytes());
        assert_eq!(s("0000:13:00.0"), Some((0, 0x13, 0)));
        assert_eq!(s("0000:13:00"), Some((0, 0x13, 0)));
        assert_eq!(s("0000:1A:00.7 trailing"), Some((0, 0x1a, 0)));
        assert_eq!(s("0:13:0"), Some((0, 0x13, 0)));
        assert_eq!(s(" 0000: 13:00.0"), Some((0, 0x13, 0)));
        assert_eq!(s("0x00:0x13:00"), None, "0x13 does not fit two characters");
        assert_eq!(s("0x00:13:00"), Some((0, 0x13, 0)));
        // A fifth domain digit is left for the ':' literal, which then fails.
        assert_eq!(s("00000:13:00.0"), None);
        assert_eq!(s("13:00.0"), None);
        assert_eq!(s("0000-13-00.0"), None);
        assert_eq!(s(""), None);
        assert_eq!(s("-1:13:00"), Some((u32::MAX, 0x13, 0)));
    }
}
