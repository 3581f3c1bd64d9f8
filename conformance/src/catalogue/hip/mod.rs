//! HIP vendor rules: what the HIP runtime documents (or its CLR implementation shows) for
//! IPC memory, IPC events, peer access, runtime queries and VMM (api-facts C.1-C.3, B.2-B.5),
//! checked through the raw `HipApi` table in this process and in peers.
//!
//! Version matters: `hipIpcMemLazyEnablePeerAccess` is 0 on ROCm 5 and 1 from 6.0, the
//! open-in-exporter check exists only from ROCm 5.6, and some refusal codes changed (5.6,
//! 6.0); rules read the runtime version, and `Need::HipAtLeast` skips a rule on an older
//! runtime, emulated or real (the emulator follows `DEVIPC_EMU_HIP_VERSION`). Two rules need only the library (no
//! device), so a machine with the runtime but no GPU still checks something real.
//!
//! One file per topic, each with its table and scenarios; [`TABLES`] lists them in report
//! order: `runtime.rs` (queries without a device), `ipc_mem.rs` (IPC memory),
//! `ipc_event.rs` (IPC events), `peer.rs` (peer access), `device.rs` (device identity under
//! visibility masks, issue 16, and the device queries of issue 25), `vmm/` (VMM
//! allocations and their POSIX-fd IPC, then mappings and addresses), `memory.rs` (the
//! driver-style copies, issue 25), `batch.rs` (`hipMemcpyBatchAsync`, issue 25). The
//! scenario helpers they share are here.

mod batch;
mod device;
mod ipc_event;
mod ipc_mem;
mod memory;
mod peer;
mod runtime;
mod vmm;

use std::ffi::c_uint;

use devipc_hip_sys::{
    hipErrorInvalidValue, hipEventDisableTiming, hipEventInterprocess,
    ipc_mem_lazy_enable_peer_access,
};

use super::{Step, pattern};
use crate::rule::{Applies, Expect, Need, Rule, Stop};
use crate::shell::hip::{Hip, HipCommand};
use crate::shell::{Exec, Failure, VendorClient};

const H: Applies = Applies::Hip;
const CHECK: usize = 256;
const SIZE: usize = 1 << 20;
const IPC_EVENT: c_uint = hipEventInterprocess | hipEventDisableTiming;
const INVALID_VALUE: Expect = Expect::Code("hipErrorInvalidValue", hipErrorInvalidValue);
const TWO_DEVICES: &[Need] = &[Need::Devices(2), Need::PeerAccess];

/// Every HIP vendor rule, table by table in report order.
pub static TABLES: &[&[Rule]] = &[
    runtime::RULES,
    ipc_mem::RULES,
    ipc_event::RULES,
    peer::RULES,
    device::RULES,
    vmm::RULES,
    vmm::mapping::RULES,
    memory::RULES,
    batch::RULES,
];

/// The `hipIpcOpenMemHandle` flag the running runtime accepts.
fn lazy<E: Exec<HipCommand>>(h: &mut Hip<E>) -> Result<u32, Stop> {
    let v = h.version().step("hipRuntimeGetVersion")?;
    Ok(ipc_mem_lazy_enable_peer_access(v))
}

/// `SIZE` bytes on device 0, filled with pattern 1: (pointer, handle).
fn exported<E: Exec<HipCommand>>(h: &mut Hip<E>) -> Result<(u64, String), Stop> {
    h.set_device(0).step("hipSetDevice(0)")?;
    let p = h.malloc(SIZE).step("hipMalloc")?;
    h.write(p, &pattern(1, CHECK)).step("filling it")?;
    let handle = h.mem_handle(p).step("hipIpcGetMemHandle")?;
    Ok((p, handle))
}

fn destroy_if_made<E: Exec<HipCommand>>(h: &mut Hip<E>, r: &Result<u64, Failure>) {
    if let Ok(e) = r {
        let _ = h.event_destroy(*e);
    }
}
