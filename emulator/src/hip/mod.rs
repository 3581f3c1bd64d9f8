//! The HIP runtime C ABI over host shared memory, enforcing AMD's IPC rules.
//!
//! This surface implements every function of [`devipc_hip_sys::for_each_hip_fn!`] as a
//! `pub unsafe extern "C" fn` of the same name and exact signature (not `#[no_mangle]`,
//! so no vendor name enters the process's dynamic symbol table), and [`hip_api`] fills a
//! [`devipc_hip_sys::HipApi`] with them. Device memory is shared memory in the state
//! directory ([`crate::state`]), so a real second process that opens an IPC handle sees
//! the exporter's bytes; rule violations return the `hipError_t` the real runtime
//! returns, and the thread's last error names the rule.
//!
//! | file | job |
//! |---|---|
//! | `ffi/` | the entry points: NULL checks, out-pointers, the only `unsafe`; one file per safe module called (`runtime.rs` .. `vmm.rs`, `errors.rs` for the error texts), `mod.rs` the tables of them all |
//! | [`errors`] | `hipError_t` results, last error, `hipGetErrorName` / `hipGetErrorString` texts |
//! | [`rules`] | one id per enforced rule, with code, basis and source; `DEVIPC_EMU_BREAK_RULE` |
//! | `runtime.rs` | `hipInit`, versions, device count, per-thread current device, ordinal <-> physical device |
//! | [`visibility`] | which physical devices the process sees under which ordinals: `ROCR_VISIBLE_DEVICES`, then `HIP_VISIBLE_DEVICES` / `CUDA_VISIBLE_DEVICES` (issue 16) |
//! | `identity.rs` | `hipDeviceGetPCIBusId`, `hipDeviceGetByPCIBusId`, `hipDeviceGetUuid` (issue 16) |
//! | `memory.rs` | `hipMalloc`, `hipFree`, `hipMemcpy`, `hipMemset`, `hipMemGetAddressRange`, `hipPointerGetAttributes` |
//! | `host.rs` | `hipHostMalloc`, `hipHostFree` |
//! | `versions.rs` | which answers depend on `DEVIPC_EMU_HIP_VERSION`, with each cut-off's evidence |
//! | `ipc_mem.rs` | `hipIpcGetMemHandle`, `hipIpcOpenMemHandle`, `hipIpcCloseMemHandle` |
//! | `stream.rs` | streams, the null stream, [`hold_stream`] / [`release_stream`] |
//! | `event.rs` | events, interprocess events in shared memory, their IPC handles |
//! | `peer.rs` | `hipDeviceCanAccessPeer`, `hipDeviceEnablePeerAccess` |
//! | `vmm.rs` | the VMM subset: `hipMemCreate` .. `hipMemSetAccess`, POSIX-fd export/import, `hipMemRetainAllocationHandle` |
//!
//! # Behaviour in brief
//!
//! - **Runtime.** `hipRuntimeGetVersion` / `hipDriverGetVersion` report
//!   `DEVIPC_EMU_HIP_VERSION` (default 6.2 = 60200000); the version also picks
//!   `hipIpcMemLazyEnablePeerAccess` (0 on 5.x, 1 from 6.0), the event flags known, and
//!   the error texts. `hipGetDeviceCount` is the number of devices the process sees: the
//!   machine's `DEVIPC_EMU_DEVICES` physical devices through the vendors' visibility
//!   variables ([`visibility`]). Each thread starts on device 0.
//! - **Devices** (issue 16). Every ordinal is this process's: an index into its view,
//!   translated to the physical id that the state directory, the memory accounting and
//!   `DEVIPC_EMU_PEERS` use, and back wherever a device goes out (the current device,
//!   pointer attributes, allocation properties). One physical device has different
//!   ordinals in processes with different masks, and the same identity in all of them
//!   ([`crate::machine`]: PCI `0000:<0x10+p>:00.0`, agent UUID `GPU-<16 hex digits>`); an
//!   ordinal outside the view is `hipErrorInvalidDevice`, a device the process does not see
//!   is reported as `hipInvalidDeviceId` (an imported allocation's location, a pointer's
//!   device: the emulator's choice, the vendor does not say) and is not found by
//!   `hipDeviceGetByPCIBusId` (`hipErrorInvalidValue`, as CLR, which only searches the
//!   process's devices). If the state directory or configuration is unusable, calls that need it
//!   return `hipErrorNotInitialized` with the reason as the message.
//! - **Memory.** `hipMalloc` memory is charged to the device's `DEVIPC_EMU_MEM_LIMIT`
//!   across processes (`hipErrorOutOfMemory`); it is host-addressable, so every
//!   `hipMemcpy` kind is a plain copy after checking the device operands.
//!   `hipMemcpy` and `hipMemset` are null-stream work the caller waits for;
//!   `hipMemcpyAsync` runs when its stream reaches it.
//! - **Streams.** Ordered queues ([`crate::stream_queue`]): asynchronous calls enqueue and
//!   return, work runs at once on an idle stream, else on the stream's own worker thread,
//!   so a wait blocks only its stream; the null stream has the legacy semantics (it waits
//!   for the device's other streams, they wait for it); errors of asynchronous work
//!   surface at the next synchronisation; `hipStreamDestroy` waits for the stream's work.
//!   `hipStreamWaitEvent` on an interprocess event waits on the calling thread before ROCm
//!   7.0, as CLR does (see `stream.rs`).
//!   `hipHostMalloc` memory is process-local host memory the devices reach.
//! - **Contexts.** `hipCtxCreate` returns the device's primary context and makes the
//!   device current on the calling thread (CLR pushes it on the context stack).
//! - **IPC memory.** Handles name the whole allocation (interior pointers record their
//!   offset); open returns the base; a second open in the same process returns the same
//!   pointer, reference counted; importers are holders, so the pages survive the
//!   exporter's `hipFree` (undefined in HIP) while new opens are refused. Cross-device
//!   opens work without enabling peer access (see `ipc_mem.rs`).
//! - **Events.** A record completes when its stream reaches it; an event never recorded
//!   is complete. Interprocess events live in the state directory, so a
//!   record in one process is seen by another. [`hold_stream`] makes work pending for
//!   tests. No binary-semaphore semantics: devipc's backend adds its own sequence word.
//! - **VMM** (issue 15, `vmm.rs`). A physical allocation is a memory object whose
//!   segment file is exported as a new fd (a `dup`) and imported by resolving the fd;
//!   reservations are real `PROT_NONE` ranges, `hipMemMap` places the file there, and the
//!   range stays inaccessible to copies until `hipMemSetAccess`. Export/import need ROCm
//!   6.2; the import's `osHandle` is a pointer to the fd before 7.1 and the fd value from
//!   7.1; `hipMemAllocationProp` is read in the 5.2 or 5.3+ layout by version.
//!   `hipIpcGetMemHandle` refuses VMM memory. Fabric handles are not modelled.
//! - **Peers.** Distinct devices can access each other; enabling is per process and
//!   reports `hipErrorPeerAccessAlreadyEnabled` the second time.
//!
//! # Choices where the vendor is silent or UNVERIFIED
//!
//! Recorded with their reasons in [`rules::ALL`] (basis [`rules::Basis::Chosen`]) and in
//! the module docs above each behaviour:
//!
//! - Codes and checks follow the emulated version (`versions.rs`): before ROCm 5.6 there
//!   is no check against opening a memory handle in the exporting process (the open maps
//!   the allocation a second time, as ROCm 5.2's ROCr attach does;
//!   [`rules::MEM_OPEN_IN_EXPORTER_REJECTED`] exists from 5.6), `hipIpcGetMemHandle`
//!   refuses with `hipErrorInvalidDevicePointer` and `hipIpcCloseMemHandle` with
//!   `hipErrorInvalidHandle` (ROCm 5.2.3's codes; `hipErrorInvalidValue` from 5.6);
//!   `hipMemGetAddressRange` of an unknown pointer is `hipErrorInvalidDevicePointer` before
//!   6.0 and `hipErrorNotFound` from 6.0; `hipPointerGetAttributes` numbers memory types
//!   as 5.x or 6.x does and refuses unknown memory before 6.0; `hipGetProcAddress` exists
//!   from 6.2. Cut-offs that the clr history does not pin are stated as assumptions there.
//! - Freeing an exported allocation before importers close it is undefined: importers
//!   keep the pages, new opens fail ([`rules::MEM_OPEN_AFTER_FREE_REJECTED`]). The
//!   object's metadata shows it as `CLOSED` ([`crate::state::ObjectFlags::CLOSED`]).
//! - Cross-device open needs no explicit peer access (the lazy flag's meaning).
//! - `hipGetErrorString` is the name on 5.x and a description from 6.0 (the exact release
//!   is UNVERIFIED); its detailed per-thread text is described in [`errors`].
//! - `hipEventCreateWithFlags`: "more than one release flag" counts
//!   `hipEventDisableSystemFence` as a release flag from 5.6, where it appeared (api-facts
//!   C.2).
//!
//! # Emulator-only extensions
//!
//! Real HIP has none of these; devipc uses them only when its table is the emulator's
//! (`LibrarySource::Emulated`): [`last_error_message`] / [`last_error`] (the violated
//! rule of the thread's latest failure) and [`hold_stream`] / [`release_stream`] (pending
//! device work, for tests).

mod batch;
mod event;
mod ffi;
mod host;
mod identity;
mod ipc_mem;
mod memory;
mod peer;
mod runtime;
mod stream;
mod versions;
pub mod visibility;
mod vmm;

pub mod errors;
pub mod rules;

pub use errors::{last_error, last_error_message};
pub use ffi::*;
pub use stream::{hold_stream, release_stream};

/// How many times this process called `hipMemRetainAllocationHandle` on `hipMalloc`
/// memory. The emulator answers `hipErrorInvalidValue` (rule
/// `hip.vmm.retain-needs-vmm-memory`, whatever the emulated version), but some ROCm 7.x
/// releases before 7.12 are reported to crash on that call (second-hand; RCCL asks
/// `HIP_POINTER_ATTRIBUTE_IS_LEGACY_HIP_IPC_CAPABLE` first), so code meant for those
/// runtimes must never make it: tests assert this count stays 0. Not a violation record:
/// the conformance rule calls it on purpose.
pub fn retains_of_malloc_memory() -> usize {
    vmm::RETAINS_OF_MALLOC_MEMORY.load(std::sync::atomic::Ordering::Relaxed)
}
