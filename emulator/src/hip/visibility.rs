//! Which physical devices this process sees, and under which ordinals: ROCr's
//! `ROCR_VISIBLE_DEVICES`, then CLR's `HIP_VISIBLE_DEVICES` (or `CUDA_VISIBLE_DEVICES`),
//! as the real runtimes apply them (issue 16).
//!
//! The machine's physical devices are `0..DEVIPC_EMU_DEVICES` ([`crate::machine`]). The
//! view is computed once per process, when the surface first needs it, from the values the
//! configuration read ([`crate::config::VisibilityEnv`]); like the real runtimes, later
//! changes of the environment do not matter. Every HIP entry point translates through it:
//! an ordinal from C is an index into the view, and what goes back to C (the current
//! device, a pointer's device, an allocation's location) is the view's index of the
//! physical device, or `hipInvalidDeviceId` for a device this process does not see.
//!
//! # ROCr: `ROCR_VISIBLE_DEVICES` (applied first)
//!
//! ROCR-Runtime `src/core/inc/amd_filter_device.h` (the rules, with examples) and
//! `src/core/runtime/amd_filter_device.cpp` (`RvdFilter`):
//! - set to the empty string: no device at all;
//! - otherwise split at commas; each token upper-cased and trimmed; only the first
//!   `min(tokens, devices)` tokens are read;
//! - a token starting with `G` is a UUID: 5 to 20 characters, a prefix of exactly one
//!   device's `GPU-<16 hex digits>` (compared upper-case); no match, or two, ends the list;
//! - any other token is an index read with `strtol(token, &end, 0)` (so `0x1` and `01`
//!   are hexadecimal and octal), which must consume the whole token; out of `0..devices`, or
//!   a device already selected, ends the list;
//! - the devices are renumbered in the order listed; what came before the end is kept.
//!
//! One case the emulator decides: an empty token (`"1,,2"`, `",1"`) makes ROCr call
//! `token.at(0)` on an empty string, which throws; the emulator ends the list there.
//!
//! # CLR: `HIP_VISIBLE_DEVICES`, else `CUDA_VISIBLE_DEVICES` (applied to ROCr's result)
//!
//! ROCm CLR `rocclr/device/rocm/rocdevice.cpp` (`Device::init`): the list is
//! `HIP_VISIBLE_DEVICES` if it is set and not empty, else `CUDA_VISIBLE_DEVICES` (set and
//! empty counts as unset for both: both empty, or unset, means no filter):
//! - split at commas (a trailing comma ends the list quietly);
//! - an entry is valid when `atoi(entry)` is in `0..devices` (the devices ROCr left) and
//!   prints back as the entry itself (`std::to_string(index) == entry`): no sign, no
//!   leading zeros, no spaces. The first invalid entry ends the list, keeping what came
//!   before;
//! - a repeated index is skipped (CUDA does not allow duplicates; the first stays);
//! - from ROCm 6.0, an entry containing `GPU-` is first replaced by the index of the first
//!   device whose agent UUID string contains it (case-sensitive; lower-case hex). The CLR
//!   source of the 5.x line has no UUID entries; the exact release that added them is
//!   UNVERIFIED, 6.0 is the emulator's cut-off (`versions.rs`, `uuid_in_hip_visible_devices`).
//!
//! Everything the list does not name is invisible. With no device left, `hipGetDeviceCount`
//! writes 0 and returns `hipErrorNoDevice`, as on a machine without a GPU.
//!
//! Rule [`super::rules::DEVICE_VISIBILITY_MASKS_APPLIED`] covers the whole: switched off, the
//! process sees every physical device under its physical id.

use std::sync::OnceLock;

use super::errors::HipResult;
use super::rules::DEVICE_VISIBILITY_MASKS_APPLIED;
use super::runtime::config;
use super::versions;
use crate::config::{Config, VisibilityEnv};
use crate::machine::{Visibility, hip_uuid_string};

/// This process's view of the machine (computed on first use).
pub(crate) fn view() -> HipResult<&'static Visibility> {
    static VIEW: OnceLock<Visibility> = OnceLock::new();
    let config = config()?;
    Ok(VIEW.get_or_init(|| of_config(config)))
}

/// The view a process with `config` has.
pub(crate) fn of_config(config: &Config) -> Visibility {
    if !config.enforces(DEVICE_VISIBILITY_MASKS_APPLIED) {
        return Visibility::all(config.devices);
    }
    let uuids = versions::uuid_in_hip_visible_devices(config.hip_version);
    Visibility::new(resolve(config.devices, &config.visibility, uuids))
}

/// The physical devices a process sees, in ordinal order, on a machine with `devices`
/// devices and the variables `env`; `uuid_entries`: whether CLR accepts `GPU-` entries.
pub fn resolve(devices: u32, env: &VisibilityEnv, uuid_entries: bool) -> Vec<u32> {
    let after_rocr = match &env.rocr {
        Some(list) => rocr(list, devices),
        None => (0..devices).collect(),
    };
    let hip = env.hip.as_deref().filter(|v| !v.is_empty());
    let cuda = env.cuda.as_deref().filter(|v| !v.is_empty());
    match hip.or(cuda) {
        Some(list) => clr(list, &after_rocr, uuid_entries),
        None => after_rocr,
    }
}

/// ROCr's filter: the selected physical devices in order.
fn rocr(list: &str, devices: u32) -> Vec<u32> {
    let mut selected: Vec<u32> = Vec::new();
    if list.is_empty() {
        return selected;
    }
    // getline(stream, token, ','): no token after a trailing comma.
    let mut tokens: Vec<&str> = list.split(',').collect();
    if list.ends_with(',') {
        tokens.pop();
    }
    let uuids: Vec<String> = (0..devices)
        .map(|p| hip_uuid_string(p).to_ascii_uppercase())
        .collect();
    for token in tokens.into_iter().take(devices as usize) {
        let token = token.trim().to_ascii_uppercase();
        let index = if token.is_empty() {
            // ROCr's token.at(0) throws here; the emulator ends the list.
            None
        } else if token.starts_with('G') {
            rocr_uuid(&token, &uuids)
        } else {
            strtol_whole(&token)
        };
        let Some(p) = index
            .and_then(|i| u32::try_from(i).ok())
            .filter(|p| *p < devices && !selected.contains(p))
        else {
            break;
        };
        selected.push(p);
    }
    selected
}

/// ROCr's UUID token: 5..=20 characters, a prefix of exactly one device's UUID.
fn rocr_uuid(token: &str, uuids: &[String]) -> Option<i64> {
    if !(5..=20).contains(&token.len()) {
        return None;
    }
    let mut found = None;
    for (i, uuid) in uuids.iter().enumerate() {
        if uuid.starts_with(token) {
            if found.is_some() {
                return None;
            }
            found = Some(i as i64);
        }
    }
    found
}

/// `strtol(text, &end, 0)` that must consume all of `text` (already trimmed): optional
/// sign, then `0x`/`0X` hexadecimal, a leading `0` octal, or decimal. `None` when a
/// character is left over or no digit was read. Values beyond `i64` saturate, as `strtol`
/// does on LP64 (and are out of range either way).
fn strtol_whole(text: &str) -> Option<i64> {
    let (negative, rest) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let (radix, digits) = if let Some(h) = rest
        .strip_prefix("0x")
        .or_else(|| rest.strip_prefix("0X"))
        .filter(|h| h.bytes().next().is_some_and(|b| b.is_ascii_hexdigit()))
    {
        (16, h)
    } else if rest.len() > 1 && rest.starts_with('0') {
        (8, &rest[1..])
    } else {
        (10, rest)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let magnitude = i128::from_str_radix(digits, radix).unwrap_or(i128::MAX);
    let value = if negative { -magnitude } else { magnitude };
    Some(value.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64)
}

/// CLR's filter over the devices ROCr left (`seen[i]` is ROCr's device `i`).
fn clr(list: &str, seen: &[u32], uuid_entries: bool) -> Vec<u32> {
    let mut selected: Vec<u32> = Vec::new();
    let mut rest = list;
    loop {
        let (entry, more) = match rest.split_once(',') {
            Some((e, m)) => (e, Some(m)),
            None => (rest, None),
        };
        let mut entry = entry.to_owned();
        if uuid_entries && entry.contains("GPU-") {
            if let Some(i) = seen
                .iter()
                .position(|p| hip_uuid_string(*p).contains(entry.as_str()))
            {
                entry = i.to_string();
            }
        }
        let index = entry
            .parse::<usize>()
            .ok()
            .filter(|i| *i < seen.len() && i.to_string() == entry);
        let Some(i) = index else {
            break;
        };
        if !selected.contains(&seen[i]) {
            selected.push(seen[i]);
        }
        match more {
            // CLR's loop runs while characters are left after the comma.
            Some(m) if !m.is_empty() => rest = m,
            _ => break,
        }
    }
    selected
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(rocr: Option<&str>, hip: Option<&str>, cuda: Option<&str>) -> VisibilityEnv {
        VisibilityEnv {
            rocr: rocr.map(str::to_owned),
            hip: hip.map(str::to_owned),
            cuda: cuda.map(str::to_owned),
            ascend_rt: None,
        }
    }

    fn hip(list: &str) -> Vec<u32> {
        resolve(4, &env(None, Some(list), None), true)
    }

    fn rocr_only(list: &str) -> Vec<u32> {
        resolve(4, &env(Some(list), None, None), true)
    }

    #[test]
    fn no_variable_is_every_device() {
        assert_eq!(resolve(3, &env(None, None, None), true), [0, 1, 2]);
        // Empty HIP/CUDA lists are no filter (CLR tests the first character).
        assert_eq!(resolve(3, &env(None, Some(""), Some("")), true), [0, 1, 2]);
    }

    #[test]
    fn clr_lists() {
        assert_eq!(hip("3,2"), [3, 2]);
        assert_eq!(hip("1"), [1]);
        assert_eq!(hip("2,0,"), [2, 0]);
        // The first invalid entry ends the list; what came before stays.
        assert_eq!(hip("1,7,2"), [1]);
        assert_eq!(hip("1,,2"), [1]);
        assert_eq!(hip(",1"), Vec::<u32>::new());
        for bad in ["01", " 1", "+1", "-0", "1a", "x", "99999999999999999999"] {
            assert_eq!(hip(bad), Vec::<u32>::new(), "{bad:?}");
        }
        // Duplicates are skipped, not fatal.
        assert_eq!(hip("2,2,1"), [2, 1]);
        // CUDA_VISIBLE_DEVICES when HIP's is unset or empty; HIP's wins when both are set.
        assert_eq!(resolve(4, &env(None, None, Some("3")), true), [3]);
        assert_eq!(resolve(4, &env(None, Some(""), Some("3")), true), [3]);
        assert_eq!(resolve(4, &env(None, Some("1"), Some("3")), true), [1]);
    }

    #[test]
    fn clr_uuid_entries_from_6_0() {
        let uuid = hip_uuid_string(2);
        assert_eq!(hip(&uuid), [2]);
        assert_eq!(hip(&format!("{uuid},0")), [2, 0]);
        // A substring of the agent's string, as CLR's find() matches.
        assert_eq!(hip(&uuid[..8]), [2], "{uuid}");
        // Case-sensitive: the agent string is lower case.
        let upper = format!("GPU-{}", uuid[4..].to_ascii_uppercase());
        if upper != uuid {
            assert_eq!(hip(&upper), Vec::<u32>::new());
        }
        // Not in the 5.x line.
        assert_eq!(
            resolve(4, &env(None, Some(&uuid), None), false),
            Vec::<u32>::new()
        );
    }

    #[test]
    fn rocr_lists() {
        // Empty: no device at all (and HIP's list then indexes nothing).
        assert_eq!(rocr_only(""), Vec::<u32>::new());
        assert_eq!(
            resolve(4, &env(Some(""), Some("0"), None), true),
            Vec::<u32>::new()
        );
        assert_eq!(rocr_only("-1"), Vec::<u32>::new());
        assert_eq!(rocr_only("3,2"), [3, 2]);
        assert_eq!(rocr_only(" 3 , 1 ,"), [3, 1]);
        // strtol base 0: hexadecimal and octal.
        assert_eq!(rocr_only("0x3,01"), [3, 1]);
        assert_eq!(rocr_only("08"), Vec::<u32>::new());
        // Out of range or repeated: the list ends there.
        assert_eq!(rocr_only("1,4,2"), [1]);
        assert_eq!(rocr_only("1,1,2"), [1]);
        assert_eq!(rocr_only("1,,2"), [1]);
        // Only the first `devices` tokens are read.
        assert_eq!(resolve(2, &env(Some("1,0,5"), None, None), true), [1, 0]);
        // UUIDs: a unique prefix, case-insensitive; GPU-XX never matches.
        let uuid = hip_uuid_string(3);
        assert_eq!(
            rocr_only(&format!("1,{}", uuid.to_ascii_uppercase())),
            [1, 3]
        );
        assert_eq!(rocr_only(&uuid[..12]), [3]);
        assert_eq!(rocr_only("GPU-XX"), Vec::<u32>::new());
        assert_eq!(rocr_only("GPU-"), Vec::<u32>::new());
    }

    #[test]
    fn hip_indexes_what_rocr_left() {
        assert_eq!(resolve(4, &env(Some("2,3"), Some("1"), None), true), [3]);
        assert_eq!(
            resolve(4, &env(Some("3,2"), Some("1,0"), None), true),
            [2, 3]
        );
        assert_eq!(
            resolve(4, &env(Some("3,2"), Some("2"), None), true),
            Vec::<u32>::new()
        );
        assert_eq!(resolve(4, &env(Some("2,3"), None, Some("1")), true), [3]);
    }
}
