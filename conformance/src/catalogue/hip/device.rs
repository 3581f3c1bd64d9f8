//! HIP device identity under visibility masks (issue 16): a process started with
//! `HIP_VISIBLE_DEVICES` sees a subset of the devices renumbered from 0, and a device's
//! PCI bus id is the same in every process, so a bus id found in one process names the
//! same physical device in another whose ordinals differ.
//!
//! The masked peer is started with `HIP_VISIBLE_DEVICES=1`: its device 0 is this
//! process's device 1 (CLR `rocclr/device/rocm/rocdevice.cpp`, `Device::init`), on the
//! emulator and on a machine with two GPUs alike.
//!
//! Issue 25: the device queries AMD's VMM tests make before any `hipMem*` call,
//! `hipDeviceGet` and `hipDeviceGetAttribute(hipDeviceAttributeVirtualMemoryManagementSupported)`.

use devipc_hip_sys::{
    hipDeviceAttributeVirtualMemoryManagementSupported, hipErrorInvalidDevice, hipErrorInvalidValue,
};

use super::H;
use crate::catalogue::{Step, ensure, vendor};
use crate::ctx::Ctx;
use crate::rule::{Expect, Need, Rule, Stop, Verdict};
use crate::shell::Failure;

const INVALID_VALUE: Expect = Expect::Code("hipErrorInvalidValue", hipErrorInvalidValue);
const INVALID_DEVICE: Expect = Expect::Code("hipErrorInvalidDevice", hipErrorInvalidDevice);
const VMM_ATTRIBUTE: Need = Need::HipAtLeast {
    major: 5,
    minor: 3,
    why: "hipDeviceAttributeVirtualMemoryManagementSupported is not in ROCm 5.2's enum (it \
          ends at hipDeviceAttributeMemoryPoolsSupported, 88)",
};
const MASK: (&str, &str) = ("HIP_VISIBLE_DEVICES", "1");

/// The device identity rules.
pub(super) static RULES: &[Rule] = &[
    vendor(
        "hip.device.visibility-masks-applied",
        H,
        "a process started with HIP_VISIBLE_DEVICES=1 sees one device, ordinal 0, which has \
         the PCI bus id of device 1 of a process without the mask; its ordinal 1 does not \
         exist (hipErrorInvalidDevice)",
        "CLR rocclr/device/rocm/rocdevice.cpp (Device::init: HIP_VISIBLE_DEVICES, else \
         CUDA_VISIBLE_DEVICES, indexes the devices ROCR_VISIBLE_DEVICES left); HIP docs \
         env_variables.rst; DESIGN 9",
        Expect::Behaviour,
        &[Need::Devices(2)],
        masks_applied,
    ),
    vendor(
        "hip.device.pci-bus-id-len-checked",
        H,
        "hipDeviceGetPCIBusId writes \"%04x:%02x:%02x.0\" (12 characters and a NUL) and \
         returns hipErrorInvalidValue for a buffer of 12 bytes or less; hipDeviceGetByPCIBusId \
         maps the text back to the same ordinal",
        "CLR hipamd/src/hip_device_runtime.cpp (hipDeviceGetPCIBusId, hipDeviceGetByPCIBusId)",
        INVALID_VALUE,
        &[],
        bus_id_len,
    ),
    vendor(
        "hip.device.by-pci-bus-id-visible-only",
        H,
        "hipDeviceGetByPCIBusId answers the calling process's ordinal: in a process started \
         with HIP_VISIBLE_DEVICES=1, device 1's bus id is ordinal 0 and device 0's bus id is \
         hipErrorInvalidValue (the mask hides it)",
        "CLR hipamd/src/hip_device_runtime.cpp (hipDeviceGetByPCIBusId loops over the \
         process's devices; no match is hipErrorInvalidValue)",
        INVALID_VALUE,
        &[Need::Devices(2)],
        by_bus_id_visible_only,
    ),
    vendor(
        "hip.device.get-checks-ordinal",
        H,
        "hipDeviceGet writes the ordinal for every device the process sees (0..count) and \
         refuses the ordinal count with hipErrorInvalidDevice",
        "CLR hipamd/src/hip_device.cpp (ihipDeviceGet: deviceId outside g_devices -> \
         hipErrorInvalidDevice); hip-tests unit/virtualMemoryManagement (hipDeviceGet before \
         the VMM calls)",
        INVALID_DEVICE,
        &[],
        get_checks_ordinal,
    ),
    vendor(
        "hip.device.vmm-attribute-reported",
        H,
        "hipDeviceGetAttribute(hipDeviceAttributeVirtualMemoryManagementSupported, 0) answers \
         1 (ROCm 5.3+, whose headers have the attribute); the same query for the device ordinal count is \
         hipErrorInvalidDevice",
        "CLR hipamd/src/hip_device_runtime.cpp (hipDeviceGetAttribute: device outside \
         ihipDeviceGetCount -> hipErrorInvalidDevice; the VMM attribute from the device info); \
         hip-tests unit/memory/hipMemVmm.cc (skips unless the attribute is 1)",
        Expect::Behaviour,
        &[VMM_ATTRIBUTE],
        vmm_attribute_reported,
    ),
];

fn masks_applied(ctx: &mut Ctx) -> Verdict {
    let mut h = ctx.hip()?;
    let count = h.device_count().step("hipGetDeviceCount")?;
    let bus1 = h.pci_bus_id(1, 64).step("hipDeviceGetPCIBusId(1)")?;
    let mut peer = ctx.hip_peer_env("masked", &[MASK])?;
    let seen = peer
        .device_count()
        .step("hipGetDeviceCount in the masked peer")?;
    ensure(seen == 1, || {
        format!("with HIP_VISIBLE_DEVICES=1 the peer sees {seen} device(s) of {count}, not 1")
    })?;
    let bus = peer
        .pci_bus_id(0, 64)
        .step("hipDeviceGetPCIBusId(0) in the masked peer")?;
    ensure(bus == bus1, || {
        format!("the masked peer's device 0 is at {bus}, this process's device 1 at {bus1}")
    })?;
    if peer.set_device(1).is_ok() {
        return Err(Stop::fail(
            "the masked peer could select device 1, which its mask hides",
        ));
    }
    Ok(format!(
        "{count} device(s) here; the masked peer sees 1, at {bus} (this process's device 1)"
    ))
}

fn bus_id_len(ctx: &mut Ctx) -> Verdict {
    let mut h = ctx.hip()?;
    let seen = ctx.refused("hipDeviceGetPCIBusId(buf, 12, 0)", h.pci_bus_id(0, 12))?;
    let bus = h
        .pci_bus_id(0, 13)
        .step("hipDeviceGetPCIBusId(buf, 13, 0)")?;
    ensure(bus.len() == 12 && bus.ends_with(".0"), || {
        format!("device 0's bus id {bus:?} is not of the form %04x:%02x:%02x.0")
    })?;
    let back = h
        .device_by_pci_bus_id(&bus)
        .step("hipDeviceGetByPCIBusId")?;
    ensure(back == 0, || {
        format!("{bus} maps back to ordinal {back}, not 0")
    })?;
    Ok(format!("{seen}; 13 bytes: {bus}, which maps back to 0"))
}

fn by_bus_id_visible_only(ctx: &mut Ctx) -> Verdict {
    let mut h = ctx.hip()?;
    let bus0 = h.pci_bus_id(0, 64).step("hipDeviceGetPCIBusId(0)")?;
    let bus1 = h.pci_bus_id(1, 64).step("hipDeviceGetPCIBusId(1)")?;
    let mut peer = ctx.hip_peer_env("masked", &[MASK])?;
    let ordinal = peer
        .device_by_pci_bus_id(&bus1)
        .step("hipDeviceGetByPCIBusId(device 1's bus id) in the masked peer")?;
    ensure(ordinal == 0, || {
        format!("the masked peer finds {bus1} at ordinal {ordinal}, not 0")
    })?;
    let seen = ctx.refused(
        &format!("hipDeviceGetByPCIBusId({bus0}) in the masked peer"),
        peer.device_by_pci_bus_id(&bus0),
    )?;
    Ok(format!("{bus1} is the masked peer's 0; {seen}"))
}

fn get_checks_ordinal(ctx: &mut Ctx) -> Verdict {
    let mut h = ctx.hip()?;
    let count = h.device_count().step("hipGetDeviceCount")?;
    for d in 0..count {
        let got = h.device_get(d).step(&format!("hipDeviceGet({d})"))?;
        ensure(got == d, || format!("hipDeviceGet({d}) wrote {got}"))?;
    }
    let seen = ctx.refused(&format!("hipDeviceGet({count})"), h.device_get(count))?;
    Ok(format!("ordinals 0..{count} are themselves; {seen}"))
}

fn vmm_attribute_reported(ctx: &mut Ctx) -> Verdict {
    let mut h = ctx.hip()?;
    let count = h.device_count().step("hipGetDeviceCount")?;
    let attr = hipDeviceAttributeVirtualMemoryManagementSupported;
    let v = h
        .device_attribute(attr, 0)
        .step("hipDeviceGetAttribute(VirtualMemoryManagementSupported, 0)")?;
    ensure(v == 1, || {
        format!("hipDeviceAttributeVirtualMemoryManagementSupported of device 0 is {v}, not 1")
    })?;
    let r = h.device_attribute(attr, count);
    let code = r.as_ref().err().and_then(Failure::code);
    ensure(code == Some(hipErrorInvalidDevice), || {
        format!(
            "the attribute of device {count} (one past the last): {r:?}, not hipErrorInvalidDevice"
        )
    })?;
    Ok(format!(
        "device 0 supports VMM (1); device {count} is hipErrorInvalidDevice"
    ))
}
