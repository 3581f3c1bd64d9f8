//! Runtime and device management: `hipInit`, versions, device count, the calling thread's
//! current device, and access to the process-wide emulator state.
//!
//! The version is `DEVIPC_EMU_HIP_VERSION` (default 6.2) in the `HIP_VERSION` encoding,
//! for both `hipRuntimeGetVersion` and `hipDriverGetVersion`. The device count is
//! `DEVIPC_EMU_DEVICES`. As in HIP, the runtime initialises lazily: `hipInit` is optional,
//! and each thread starts on device 0.

use std::cell::Cell;
use std::ffi::{c_int, c_uint};

use devipc_hip_sys::{
    hipErrorInvalidDevice, hipErrorInvalidValue, hipErrorNoDevice, hipErrorNotInitialized,
};

use super::errors::{Failure, HipResult};
use super::rules::{self, INIT_FLAGS_MUST_BE_ZERO};
use super::stream;
use crate::config::Config;
use crate::state::{ProcessIdentity, State};

thread_local! {
    /// The calling thread's device (`hipSetDevice`); HIP starts every thread on device 0.
    static CURRENT_DEVICE: Cell<u32> = const { Cell::new(0) };
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

/// A device ordinal from C: `hipErrorInvalidDevice` unless `0 <= id < devices`.
pub(crate) fn device_arg(state: &State, id: c_int) -> HipResult<u32> {
    let count = state.registry().devices();
    u32::try_from(id)
        .ok()
        .filter(|d| *d < count)
        .ok_or_else(|| {
            Failure::new(
                hipErrorInvalidDevice,
                format!(
                    "device {id} does not exist: {count} emulated device(s) (DEVIPC_EMU_DEVICES)"
                ),
            )
        })
}

/// The calling thread's device, checked against the device count.
pub(crate) fn current_device(state: &State) -> HipResult<u32> {
    let device = CURRENT_DEVICE.with(Cell::get);
    state.registry().check_device(device)?;
    Ok(device)
}

/// `hipInit(flags)`.
pub(crate) fn init(flags: c_uint) -> HipResult<()> {
    // The runtime initialises before it looks at the flags (hipamd's HIP_INIT_API runs
    // first), so without a device every call fails the same way, flags or not.
    let state = state()?;
    if state.registry().devices() == 0 {
        // What ROCm 5.2's hipInit returns on a machine without a GPU (api-facts B.1).
        return Err(Failure::new(
            hipErrorInvalidDevice,
            "no emulated device (DEVIPC_EMU_DEVICES=0)",
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
    let count = state()?.registry().devices();
    // MAX_DEVICES is 64, so the count always fits.
    Ok(c_int::try_from(count).unwrap_or(c_int::MAX))
}

/// The failure `hipGetDeviceCount` returns after writing 0.
pub(crate) fn no_device() -> Failure {
    Failure::new(
        hipErrorNoDevice,
        "no emulated device (DEVIPC_EMU_DEVICES=0)",
    )
}

/// `hipSetDevice(id)`.
pub(crate) fn set_device(id: c_int) -> HipResult<()> {
    let device = device_arg(state()?, id)?;
    CURRENT_DEVICE.with(|c| c.set(device));
    Ok(())
}

/// `hipGetDevice`: the calling thread's device.
pub(crate) fn get_device() -> HipResult<c_int> {
    let state = state()?;
    if state.registry().devices() == 0 {
        return Err(no_device());
    }
    let device = current_device(state)?;
    Ok(device as c_int)
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
    let count = state()?.registry().devices();
    let device = u32::try_from(device)
        .ok()
        .filter(|d| *d < count)
        .ok_or_else(|| {
            Failure::invalid_value(format!(
                "device {device} does not exist: {count} emulated device(s) (DEVIPC_EMU_DEVICES)"
            ))
        })?;
    CURRENT_DEVICE.with(|c| c.set(device));
    Ok(&CONTEXTS[device as usize] as *const u8 as usize)
}
