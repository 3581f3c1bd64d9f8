//! The ACL rules of IPC keys: memory of `aclrtMalloc` shared by key.

use devipc_ascend_sys::codes::{
    ACL_ERROR_RT_DRV_INTERNAL_ERROR, ACL_ERROR_RT_PARAM_INVALID, ACL_ERROR_RT_SYS_DMA, ACL_SUCCESS,
};

use super::{Basis, RuleInfo, WHY_DRIVER, WHY_REVOKED, WHY_RT_PARAM};

/// Key buffers hold at least 65 bytes.
pub const KEY_MIN_LEN: &str = "ascend.ipc-key.min-len-65";
/// Exported sizes are not 0.
pub const KEY_SIZE_NONZERO: &str = "ascend.ipc-key.size-nonzero";
/// Key flags are 0 or 1.
pub const KEY_FLAGS: &str = "ascend.ipc-key.flags-valid";
/// Keys export aclrtMalloc memory of this process.
pub const KEY_MALLOC_ONLY: &str = "ascend.ipc-key.exports-malloc-memory";
/// Exported ranges start page aligned.
pub const KEY_PAGE_ALIGNED: &str = "ascend.ipc-key.page-aligned";
/// aclrtIpcMemSetImportPid needs pids.
pub const KEY_SET_PID_ARGS: &str = "ascend.ipc-key.set-pid-needs-pids";
/// Import needs the trustlist unless pid validation is off.
pub const KEY_TRUSTLIST: &str = "ascend.ipc-key.trustlist-required";
/// A process may import a key repeatedly.
pub const KEY_REPEAT_IMPORT: &str = "ascend.ipc-key.repeat-import-allowed";
/// Importers close before the exporter.
pub const KEY_IMPORTERS_CLOSE_FIRST: &str = "ascend.ipc-key.importers-close-first";
/// The block under a key stays allocated while the key is imported.
pub const KEY_FREE_WHILE_IMPORTED: &str = "ascend.ipc-key.free-while-imported";
/// Import on another device needs peer access.
pub const KEY_CROSS_DEVICE: &str = "ascend.ipc-key.cross-device-needs-peer-access";
/// Key imports used across devices take no synchronous or host copies.
pub const KEY_CROSS_DEVICE_COPY: &str = "ascend.ipc-key.cross-device-copy-restricted";
/// aclrtIpcMemClose in an importer unmaps its oldest import.
pub const KEY_CLOSE_OLDEST: &str = "ascend.ipc-key.close-unmaps-oldest-import";

/// The rules of this file, in [`super::ALL`]'s order.
pub(super) const RULES: &[RuleInfo] = &[
    RuleInfo {
        id: KEY_MIN_LEN,
        code: ACL_ERROR_RT_PARAM_INVALID,
        basis: Basis::Documented,
        breakable: false,
        summary: "aclrtIpcMemGetExportKey's key buffer len must be at least 65",
        when_broken: None,
        source: "api-facts A.7, C.4 (RT-DOC 11-07; RT-SRC api_error.cc)",
        since: None,
    },
    RuleInfo {
        id: KEY_SIZE_NONZERO,
        code: ACL_ERROR_RT_PARAM_INVALID,
        basis: Basis::Documented,
        breakable: false,
        summary: "aclrtIpcMemGetExportKey rejects size 0",
        when_broken: None,
        source: "api-facts C.4 (RT-SRC api_error.cc)",
        since: None,
    },
    RuleInfo {
        id: KEY_FLAGS,
        code: ACL_ERROR_RT_PARAM_INVALID,
        basis: Basis::Documented,
        breakable: true,
        summary: "aclrtIpcMemGetExportKey and aclrtIpcMemImportByKey flags must be 0 or 0x1",
        when_broken: None,
        source: "api-facts C.4 (RT-SRC api_error.cc)",
        since: None,
    },
    RuleInfo {
        id: KEY_MALLOC_ONLY,
        code: ACL_ERROR_RT_PARAM_INVALID,
        basis: Basis::Chosen(WHY_RT_PARAM),
        breakable: false,
        summary: "aclrtIpcMemGetExportKey's devPtr..devPtr+size must lie in one aclrtMalloc block \
                  of this process",
        when_broken: None,
        source: "api-facts A.7, C.4 (RT-DOC 11-07)",
        since: None,
    },
    RuleInfo {
        id: KEY_PAGE_ALIGNED,
        code: ACL_ERROR_RT_PARAM_INVALID,
        basis: Basis::Chosen(WHY_RT_PARAM),
        breakable: true,
        summary: "the exported range must be page-table aligned at both ends: devPtr and \
                  devPtr+size on a 4 KiB page boundary of the block (the IPC interfaces refuse a \
                  range that shares a page with other memory, against information leaks across \
                  processes)",
        when_broken: None,
        source: "api-facts C.4; RT-DOC FAQ inter_process_IPC_page_table_align_requirements.md \
                 (exporting 1024 bytes of an aclrtMalloc(1024) 'may fail: not page-table aligned'; \
                 4096 of aclrtMalloc(4096) succeeds; normal pages 4K, huge pages 2M or 1G)",
        since: None,
    },
    RuleInfo {
        id: KEY_SET_PID_ARGS,
        code: ACL_ERROR_RT_PARAM_INVALID,
        basis: Basis::Documented,
        breakable: false,
        summary: "aclrtIpcMemSetImportPid rejects a NULL pid array and num 0",
        when_broken: None,
        source: "api-facts C.4 (RT-SRC api_error.cc)",
        since: None,
    },
    RuleInfo {
        id: KEY_TRUSTLIST,
        code: ACL_ERROR_RT_DRV_INTERNAL_ERROR,
        basis: Basis::Chosen(WHY_DRIVER),
        breakable: true,
        summary: "aclrtIpcMemImportByKey needs the importer's pid on the key's trustlist unless \
                  the key was exported with DISABLE_PID_VALIDATION",
        when_broken: None,
        source: "api-facts A.7, A.11, C.4",
        since: None,
    },
    RuleInfo {
        id: KEY_REPEAT_IMPORT,
        code: ACL_SUCCESS,
        basis: Basis::Behaviour,
        breakable: true,
        summary: "repeated imports of one key in one process are allowed: each gives a new address \
                  and needs its own aclrtIpcMemClose",
        when_broken: None,
        source: "api-facts C.4 (RT-SRC api_impl_standard_soc.cc)",
        since: None,
    },
    RuleInfo {
        id: KEY_IMPORTERS_CLOSE_FIRST,
        code: ACL_ERROR_RT_SYS_DMA,
        basis: Basis::Chosen(WHY_REVOKED),
        breakable: true,
        summary: "importers close the key before the exporter: the exporter's aclrtIpcMemClose \
                  destroys the key even while other processes still map their imports (undefined: \
                  'exceptions may occur'); the emulator records the violation and those imports' \
                  copies fail; their closes still succeed",
        when_broken: None,
        source: "api-facts C.4 (RT-DOC 11-07)",
        since: None,
    },
    RuleInfo {
        id: KEY_FREE_WHILE_IMPORTED,
        code: ACL_ERROR_RT_SYS_DMA,
        basis: Basis::Chosen(WHY_REVOKED),
        breakable: true,
        summary: "aclrtFree of a block whose key other processes still map frees it under them \
                  (importers close before the exporter closes and frees, RT-DOC 11-07): the \
                  emulator revokes the pages for every process (host access faults, copies fail) \
                  and records the violation",
        when_broken: None,
        source: "api-facts C.4 (RT-DOC 11-07)",
        since: None,
    },
    RuleInfo {
        id: KEY_CROSS_DEVICE,
        code: ACL_ERROR_RT_DRV_INTERNAL_ERROR,
        basis: Basis::Chosen(WHY_DRIVER),
        breakable: true,
        summary: "importing a key on a device other than the owner's needs the ENABLE_PEER_ACCESS \
                  flag or aclrtDeviceEnablePeerAccess to the owner's device",
        when_broken: None,
        source: "api-facts C.4 (RT-DOC 11-07)",
        since: None,
    },
    RuleInfo {
        id: KEY_CROSS_DEVICE_COPY,
        code: ACL_ERROR_RT_PARAM_INVALID,
        basis: Basis::Chosen(
            "the copy's kind is not allowed on that memory: a runtime-layer \
                              argument check (107000); the vendor names no code",
        ),
        breakable: true,
        summary: "memory imported by key onto another device than its owner's accepts only \
                  asynchronous device-to-device copies: aclrtMemcpy (synchronous, any kind) on it \
                  fails, and so does aclrtMemcpyAsync of a host kind or ACL_MEMCPY_DEFAULT; \
                  aclrtMemcpyAsync device to device works; on the owner's device there is no \
                  restriction",
        when_broken: None,
        source: "api-facts C.4 (RT-DOC 11-07)",
        since: None,
    },
    RuleInfo {
        id: KEY_CLOSE_OLDEST,
        code: ACL_SUCCESS,
        basis: Basis::Behaviour,
        breakable: true,
        summary: "after several imports of one key in a process, each aclrtIpcMemClose unmaps the \
                  oldest remaining import (first in, first out); the newer addresses stay usable",
        when_broken: None,
        source: "RT-SRC api_impl_standard_soc.cc IpcCloseMemory (closes vaList.front() of the \
                 key's per-process address list)",
        since: None,
    },
];
