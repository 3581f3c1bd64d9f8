//! Runtime and device management: `hipInit`, versions, device count, the calling thread's
//! current device, and access to the process-wide emulator state.
//!
//! The version is `DEVIPC_EMU_HIP_VERSION` (default 6.2) in the `HIP_VERSION` encoding,
//! for both `hipRuntimeGetVersion` and `hipDriverGetVersion`. The devices are the ones
//! this process sees ([`super::visibility`]: `DEVIPC_EMU_DEVICES` physical devices through
//! `ROCR_VISIBLE_DEVICES` and `HIP_VISIBLE_DEVICES`); an ordinal is an index into that
//! view, and the functions here translate it to the physical id everything else uses
//! ([`device_arg`], [`current_device`]) and back ([`ordinal_of`]). As in HIP, the runtime
//! initialises lazily: `hipInit` is optional, and each thread starts on device 0.
//! `hipDeviceGet` and `hipDeviceGetAttribute` (issue 25) answer from the same view.

use std::cell::Cell;
use std::ffi::{c_int, c_uint};

use devipc_hip_sys::{
    hipErrorInvalidDevice, hipErrorInvalidValue, hipErrorNoDevice, hipErrorNotInitialized,
};

use super::errors::{Failure, HipResult};
use super::rules::{self, INIT_FLAGS_MUST_BE_ZERO};
use super::{stream, versions, visibility};
use crate::config::Config;
use crate::state::{ProcessIdentity, State};

thread_local! {
    /// The calling thread's device (`hipSetDevice`), as this process's ordinal, and the
    /// process that set it; HIP starts every thread on device 0, and so does a forked
    /// child (the thread that forks keeps its thread-locals: [`crate::local`]).
    static CURRENT_DEVICE: Cell<(u32, u32)> = const { Cell::new((0, 0)) };
}

/// The calling thread's current ordinal.
fn current_ordinal() -> u32 {
    let (ordinal, pid) = CURRENT_DEVICE.with(Cell::get);
    if pid == crate::local::pid() {
        ordinal
    } else {
        0
    }
}

/// Makes `ordinal` the calling thread's current device.
fn set_current_ordinal(ordinal: u32) {
    CURRENT_DEVICE.with(|c| c.set((ordinal, crate::local::pid())));
}

/// The configuration of this process (`hipErrorNotInitialized` if it does not parse).
pub(crate) fn config() -> HipResult<&'static Config> {
    Config::global().map_err(|e| {
        Failure::new(
            hipErrorNotInitialized,
            format!("the emulator is unavailable: {e}"),
        )
    })
}

/// The process-wide emulator state (`hipErrorNotInitialized` if the configuration or the
/// state directory is unusable).
pub(crate) fn state() -> HipResult<&'static State> {
    State::global().map_err(|e| Failure::new(hipErrorNotInitialized, e.to_string()))
}

/// This process's identity (pid and start time).
pub(crate) fn me() -> HipResult<ProcessIdentity> {
    Ok(crate::state::process::current()?)
}

/// The physical device of an ordinal from C: `hipErrorInvalidDevice` unless
/// `0 <= id <` the number of devices this process sees.
pub(crate) fn device_arg(state: &State, id: c_int) -> HipResult<u32> {
    let _ = state;
    physical_of(id).ok_or_else(|| not_visible(id))
}

/// The physical device of ordinal `id`, if this process sees that many devices.
pub(crate) fn physical_of(id: c_int) -> Option<u32> {
    let view = visibility::view().ok()?;
    u32::try_from(id).ok().and_then(|i| view.physical(i))
}

/// `hipErrorInvalidDevice` for an ordinal this process does not have.
fn not_visible(id: c_int) -> Failure {
    let (count, devices) = match (visibility::view(), config()) {
        (Ok(v), Ok(c)) => (v.count(), c.devices),
        _ => (0, 0),
    };
    Failure::new(
        hipErrorInvalidDevice,
        format!(
            "device {id} does not exist: this process sees {count} of the {devices} emulated \
             device(s) (DEVIPC_EMU_DEVICES, ROCR_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES)"
        ),
    )
}

/// This process's ordinal of physical device `p`, `None` when its masks hide it.
pub(crate) fn ordinal_of(p: u32) -> HipResult<Option<c_int>> {
    Ok(visibility::view()?
        .index_of(p)
        .and_then(|i| c_int::try_from(i).ok()))
}

/// This process's ordinal of physical device `p`, or `hipInvalidDeviceId` (-1) for a
/// device its masks hide: what pointer attributes and allocation properties report.
pub(crate) fn ordinal_or_invalid(p: u32) -> HipResult<c_int> {
    Ok(ordinal_of(p)?.unwrap_or(devipc_hip_sys::hipInvalidDeviceId))
}

/// The number of devices this process sees.
pub(crate) fn visible_count() -> HipResult<u32> {
    Ok(visibility::view()?.count())
}

/// The calling thread's device (physical id), checked against this process's view.
pub(crate) fn current_device(state: &State) -> HipResult<u32> {
    let ordinal = current_ordinal();
    let device = c_int::try_from(ordinal)
        .ok()
        .and_then(physical_of)
        .ok_or_else(|| not_visible(ordinal as c_int))?;
    state.registry().check_device(device)?;
    Ok(device)
}

/// `hipInit(flags)`.
pub(crate) fn init(flags: c_uint) -> HipResult<()> {
    // The runtime initialises before it looks at the flags (hipamd's HIP_INIT_API runs
    // first), so without a device every call fails the same way, flags or not.
    state()?;
    if visible_count()? == 0 {
        // What ROCm 5.2's hipInit returns on a machine without a GPU (api-facts B.1).
        return Err(Failure::new(
            hipErrorInvalidDevice,
            "no emulated device visible (DEVIPC_EMU_DEVICES=0, or the visibility masks hide \
             every device)",
        ));
    }
    if flags != 0 && rules::enforced(INIT_FLAGS_MUST_BE_ZERO) {
        return Err(Failure::rule(
            hipErrorInvalidValue,
            INIT_FLAGS_MUST_BE_ZERO,
            format!("flags {flags:#x}: hipInit takes flags = 0"),
        ));
    }
    Ok(())
}

/// `hipRuntimeGetVersion` / `hipDriverGetVersion`: the emulated version, encoded.
pub(crate) fn version() -> HipResult<c_int> {
    Ok(config()?.hip_version.encoded())
}

/// `hipGetDeviceCount`: the count to write. With no device the entry point writes 0 and
/// then fails with [`no_device`], like HIP.
pub(crate) fn device_count() -> HipResult<c_int> {
    state()?;
    let count = visible_count()?;
    // MAX_DEVICES is 64, so the count always fits.
    Ok(c_int::try_from(count).unwrap_or(c_int::MAX))
}

/// The failure `hipGetDeviceCount` returns after writing 0.
pub(crate) fn no_device() -> Failure {
    Failure::new(
        hipErrorNoDevice,
        "no emulated device visible (DEVIPC_EMU_DEVICES=0, or the visibility masks hide every \
         device)",
    )
}

/// `hipSetDevice(id)`.
pub(crate) fn set_device(id: c_int) -> HipResult<()> {
    device_arg(state()?, id)?;
    set_current_ordinal(id as u32);
    Ok(())
}

/// `hipGetDevice`: the calling thread's device.
pub(crate) fn get_device() -> HipResult<c_int> {
    let state = state()?;
    if visible_count()? == 0 {
        return Err(no_device());
    }
    current_device(state)?;
    Ok(current_ordinal() as c_int)
}

/// `hipDeviceSynchronize`: waits until every stream of the current device in this
/// process has finished its work; returns the first failure of that work.
pub(crate) fn device_synchronize() -> HipResult<()> {
    let device = current_device(state()?)?;
    stream::synchronize_device(device)
}

/// The primary context of each device: `hipCtxCreate` hands out the address of its
/// device's byte, a stable non-NULL `hipCtx_t` (CLR hands out the device object itself).
static CONTEXTS: [u8; crate::config::MAX_DEVICES as usize] =
    [0; crate::config::MAX_DEVICES as usize];

/// `hipCtxCreate(flags, device)`: the device's primary context, made current on this
/// thread (CLR pushes it on the thread's context stack, which decides the current
/// device). A device out of range is `hipErrorInvalidValue`, not `hipErrorInvalidDevice`
/// (CLR `hip_context.cpp`); `flags` are stored by CLR and not checked.
pub(crate) fn ctx_create(_flags: c_uint, device: c_int) -> HipResult<usize> {
    let physical = device_arg(state()?, device).map_err(|f| Failure::invalid_value(f.message))?;
    set_current_ordinal(device as u32);
    Ok(&CONTEXTS[physical as usize] as *const u8 as usize)
}

/// `hipDeviceGet(ordinal)`: the device handle, which is the ordinal
/// ([`rules::DEVICE_GET_CHECKS_ORDINAL`]: `hipErrorInvalidDevice` for a device this
/// process does not see).
pub(crate) fn device_get(ordinal: c_int) -> HipResult<c_int> {
    let state = state()?;
    match device_arg(state, ordinal) {
        Err(f) if rules::enforced(rules::DEVICE_GET_CHECKS_ORDINAL) => Err(Failure::rule(
            f.code,
            rules::DEVICE_GET_CHECKS_ORDINAL,
            f.message,
        )),
        _ => Ok(ordinal),
    }
}

/// `hipDeviceGetAttribute(attr, device)`: only
/// `hipDeviceAttributeVirtualMemoryManagementSupported` is modelled
/// ([`rules::DEVICE_VMM_ATTRIBUTE_REPORTED`]); any other attribute is
/// `hipErrorInvalidValue`, as CLR answers one its switch lacks.
pub(crate) fn device_attribute(
    attr: devipc_hip_sys::hipDeviceAttribute_t,
    device: c_int,
) -> HipResult<c_int> {
    device_arg(state()?, device)?;
    let version = config()?.hip_version;
    if attr != devipc_hip_sys::hipDeviceAttributeVirtualMemoryManagementSupported {
        return Err(Failure::invalid_value(format!(
            "device attribute {attr} is not emulated (only \
             hipDeviceAttributeVirtualMemoryManagementSupported, {} is)",
            devipc_hip_sys::hipDeviceAttributeVirtualMemoryManagementSupported
        )));
    }
    if !versions::vmm_attribute(version) {
        return Err(Failure::invalid_value(format!(
            "HIP {version} has no hipDeviceAttributeVirtualMemoryManagementSupported (from \
             ROCm 5.3)"
        )));
    }
    if !rules::enforced(rules::DEVICE_VMM_ATTRIBUTE_REPORTED) {
        // Broken rule: as a device without VMM support.
        return Ok(0);
    }
    Ok(1)
}
