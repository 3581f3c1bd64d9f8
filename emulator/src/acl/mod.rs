//! The ACL (Ascend) surface: every function of `devipc_ascend_sys::for_each_acl_fn!`
//! over host shared memory, across real processes, with the vendor's IPC rules and
//! numeric error codes.
//!
//! Use it in-process through [`acl_api`] (an [`AclApi`] whose source is
//! `LibrarySource::Emulated`), or export the vendor symbol names from a shared library
//! with `devipc_ascend_sys::acl_export_c_abi!(devipc_emulator::acl)`. The functions
//! themselves (`aclInit`, `aclrtMalloc`, ...) are `pub unsafe extern "C"` here under the
//! vendor names, *without* `#[no_mangle]`, so linking the emulator into a process adds no
//! vendor names to its dynamic symbol table.
//!
//! # Modules
//!
//! | module | job |
//! |---|---|
//! | `ffi` | the C entry points (one per function of the list, one file per topic): NULL checks, pointer reads/writes, panics caught (the only `unsafe`) |
//! | [`rules`] | the rule ids, their codes, and whether each code is documented or chosen |
//! | `errors` | [`AclFailure`]; infrastructure error -> code mapping; `aclGetRecentErrMsg` |
//! | `process_state` | the process-wide emulator state (state directory, registry), this process's identity, the device count |
//! | `init` | `aclInit` / `aclFinalize` counting, version queries |
//! | `device` | devices, the per-thread current device, forced reset, device synchronisation, memory info, peer access, bare tgid |
//! | [`visibility`] | the user, logical and physical id spaces: `ASCEND_RT_VISIBLE_DEVICES` over the container view `DEVIPC_EMU_ASCEND_PHY_IDS` (issue 16) |
//! | `stream` | streams as ordered task queues (waits block only their stream), the default streams, synchronisation, destroy (waiting) and forced destroy (dropping) |
//! | `memory` | `aclrtMalloc` and `aclrtMallocHost` blocks, the device address ranges, copy (sync and async) and fill checks |
//! | `vmm` | granularity, physical memory, reservations, mappings, access |
//! | `shareable` | VMM export / trustlist / import of shareable handles |
//! | `ipc_key` | key-based IPC memory |
//! | `notify` | notifies, notify IPC, record / wait-and-reset |
//! | `event` | events and IPC events (handle export / open, record, stream wait) |
//!
//! Each module's documentation states the behaviour it emulates and its choices.
//!
//! # Behaviour in brief
//!
//! - Every call NULL-checks its pointers (`ACL_ERROR_INVALID_PARAM`, 100000, as the ACL
//!   wrappers do), never unwinds into C, and on failure sets the thread's last error to
//!   `"<function>: <what> (<CODE_NAME> <code>) [rule <id>]"`, which `aclGetRecentErrMsg`
//!   returns once (it gets and clears, like the vendor's).
//! - Calls on "the current device" need `aclrtSetDevice` on the thread (107002).
//! - Every device id a call takes or returns is a *user* id (issue 16,
//!   [`visibility`]): user id i is the i-th logical id `ASCEND_RT_VISIBLE_DEVICES` lists,
//!   logical id j is physical device `DEVIPC_EMU_ASCEND_PHY_IDS[j]` (default j); inside,
//!   and in the state directory, devices are physical. `aclrtGetLogicDevIdByUserDevId`,
//!   `aclrtGetUserDevIdByLogicDevId`, `aclrtGetLogicDevIdByPhyDevId` and
//!   `aclrtGetPhyDevIdByLogicDevId` translate between the spaces, `aclrtDeviceGetUuid`
//!   gives each physical device's 16 bytes ([`crate::machine::ascend_uuid`]); an id that
//!   is not there is 107001. `aclrtMemSetAccess` reads user ids, or logical ids with
//!   `DEVIPC_EMU_ASCEND_SET_ACCESS_IDS=logical` (see `vmm.rs` for the evidence).
//! - Device memory lives in the state directory and is charged to a per-device limit
//!   shared by all processes (`DEVIPC_EMU_MEM_LIMIT`; 207001 beyond it).
//! - Memory and notifies shared with other processes live until every process that
//!   allocated or imported them released them; a process killed with imports is
//!   reclaimed by the next touch or [`crate::gc`].
//! - `DEVIPC_EMU_BREAK_RULE=<rule id>` switches one breakable rule off (tests only).
//!
//! # Codes the vendor does not document
//!
//! Where api-facts D.4 leaves the code of a violation unverified, the emulator chose one;
//! [`rules::ALL`] records every rule's code with [`rules::Basis`]. In short:
//!
//! | violation | code | why |
//! |---|---|---|
//! | importer not on a trustlist (VMM, key, notify) | 507899 `ACL_ERROR_RT_DRV_INTERNAL_ERROR` | driver errors outside the runtime's table map to 507899; observed for key imports |
//! | same-process VMM import; second export or import of one shareable handle; cross-device import without peer access; trustlist set by a non-exporter | 507899 | the driver refuses these; same mapping |
//! | exporter destroys a key while importers hold it (`ascend.ipc-key.importers-close-first`) | 507899 | the driver's destroy of a name still open elsewhere fails; same mapping. The key stays valid, so the exporter can retry after the importers closed |
//! | unaligned key export, size not a multiple of the granularity, mapping outside a reservation, copy out of bounds or of the wrong kind, synchronous or host copy of a key import used on another device, unknown device pointer | 107000 `ACL_ERROR_RT_PARAM_INVALID` | runtime-layer argument validation |
//! | unknown/stale handle, stream, notify, key, shareable handle | 107017 `ACL_ERROR_RT_INVALID_HANDLE` | `DRV_ERROR_INVALID_HANDLE` mapping |
//! | notify wait expired | 107019 `ACL_ERROR_RT_WAIT_TIMEOUT`, from the stream's next `aclrtSynchronizeStream` (the wait is a stream task) | the runtime's wait-timeout code; `timeout` is taken in **seconds** (RT-DOC and the runtime's own log; the header says ms) |
//! | notify key `len < 65`, bad notify flags (e.g. the memory flag 0x1) | 107000 | the documented code of the same checks for memory keys |
//! | one reservation mapping two devices' memory, or local and imported handles | 107000 | `aclrtMapMem`'s reference forbids both without a code; the driver's invalid-argument mapping |
//!
//! Other choices: the ACL version is 1.16.0 and `aclsysGetVersionStr` reports
//! `"8.5.0-devipc-emulator"` ([`VERSION_STR`]); the VMM granularity is 2 MiB
//! ([`GRANULARITY`]; 1 GiB for the 1 GiB page kinds); `aclrtDeviceGetBareTgid` is the pid
//! (no container distinction); trustlist calls add to the list; an exporter may import
//! its own IPC key (RT-SRC's close handles that case) but not its own shareable handle.

mod batch;
mod device;
mod errors;
mod event;
mod ffi;
mod init;
mod ipc_key;
mod memory;
mod notify;
mod process_state;
pub mod rules;
mod shareable;
mod stream;
pub use stream::{hold_stream, release_stream};
pub mod visibility;
mod vmm;

pub use devipc_ascend_sys::AclApi;
pub use errors::AclFailure;
pub use ffi::*;
pub use init::{ACL_VERSION, VERSION_STR};
pub use vmm::{GRANULARITY, GRANULARITY_1G};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_complete_and_emulated() {
        let api = acl_api();
        assert!(api.missing_optional().is_empty());
        assert!(api.source().is_emulated());
    }
}
