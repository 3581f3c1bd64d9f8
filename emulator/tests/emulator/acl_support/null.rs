//! The ACL shell's NULL-pointer calls (`null <case>`): one function of the list with a
//! NULL pointer where its contract needs one, and the list of the cases.

use std::ptr;

use devipc_ascend_sys::types::*;

use super::{Reply, Shell, key_buf, key_ptr, phys_prop};

impl Shell {
    /// Calls one function with a NULL pointer where the contract needs one.
    pub(super) fn null_call(&mut self, which: &str) -> Reply {
        let api = &self.api;
        let null = ptr::null_mut::<c_void>();
        let prop = phys_prop(0, i128::from(ACL_MEM_HUGE), 1, 0);
        let key = key_buf("devipc-emu:acl:memkey:0000010000000001");
        let code = match which {
            "get-device" => req!(api, aclrtGetDevice(ptr::null_mut())),
            "device-count" => req!(api, aclrtGetDeviceCount(ptr::null_mut())),
            "malloc" => req!(api, aclrtMalloc(ptr::null_mut(), 64, 0)),
            "free" => req!(api, aclrtFree(null)),
            "memcpy-dst" => req!(api, aclrtMemcpy(null, 1, [0u8].as_ptr().cast(), 1, 0)),
            "memcpy-src" => req!(api, aclrtMemcpy([0u8].as_mut_ptr().cast(), 1, null, 1, 0)),
            "memcpy-async-dst" => opt!(
                api,
                aclrtMemcpyAsync(null, 1, [0u8].as_ptr().cast(), 1, 0, null)
            ),
            "memcpy-async-src" => opt!(
                api,
                aclrtMemcpyAsync([0u8].as_mut_ptr().cast(), 1, null, 1, 0, null)
            ),
            "memset" => req!(api, aclrtMemset(null, 1, 0, 1)),
            "stream-create" => req!(api, aclrtCreateStream(ptr::null_mut())),
            "stream-destroy" => req!(api, aclrtDestroyStream(null)),
            "malloc-physical-handle" => {
                req!(api, aclrtMallocPhysical(ptr::null_mut(), 2 << 20, &prop, 0))
            }
            "malloc-physical-prop" => {
                let mut h = null;
                req!(api, aclrtMallocPhysical(&mut h, 2 << 20, ptr::null(), 0))
            }
            "free-physical" => req!(api, aclrtFreePhysical(null)),
            "reserve" => req!(
                api,
                aclrtReserveMemAddress(ptr::null_mut(), 2 << 20, 0, null, 0)
            ),
            "release-address" => req!(api, aclrtReleaseMemAddress(null)),
            "map" => req!(api, aclrtMapMem(null, 2 << 20, 0, null, 0)),
            "unmap" => req!(api, aclrtUnmapMem(null)),
            "can-access" => req!(api, aclrtDeviceCanAccessPeer(ptr::null_mut(), 0, 1)),
            "range" => opt!(
                api,
                aclrtMemGetAddressRange(null, ptr::null_mut(), ptr::null_mut())
            ),
            "granularity" => opt!(
                api,
                aclrtMemGetAllocationGranularity(ptr::null_mut(), 0, ptr::null_mut())
            ),
            "set-access" => opt!(api, aclrtMemSetAccess(null, 2 << 20, ptr::null_mut(), 1)),
            "export" => opt!(
                api,
                aclrtMemExportToShareableHandle(null, 0, 0, ptr::null_mut())
            ),
            "import" => opt!(
                api,
                aclrtMemImportFromShareableHandle(1, 0, ptr::null_mut())
            ),
            "key-export" => opt!(
                api,
                aclrtIpcMemGetExportKey(null, 64, ptr::null_mut(), 65, 0)
            ),
            "key-set-pid" => {
                let mut pid = 1;
                opt!(api, aclrtIpcMemSetImportPid(ptr::null(), &mut pid, 1))
            }
            "key-import" => opt!(
                api,
                aclrtIpcMemImportByKey(ptr::null_mut(), key_ptr(&key), 0)
            ),
            "key-close" => opt!(api, aclrtIpcMemClose(ptr::null())),
            "bare-tgid" => opt!(api, aclrtDeviceGetBareTgid(ptr::null_mut())),
            "notify-create" => opt!(api, aclrtCreateNotify(ptr::null_mut(), 0)),
            "notify-destroy" => opt!(api, aclrtDestroyNotify(null)),
            "notify-export" => opt!(api, aclrtNotifyGetExportKey(null, ptr::null_mut(), 65, 0)),
            "notify-set-pid" => {
                let mut pid = 1;
                opt!(api, aclrtNotifySetImportPid(null, &mut pid, 1))
            }
            "notify-import" => opt!(api, aclrtNotifyImportByKey(ptr::null_mut(), ptr::null(), 0)),
            "notify-record" => opt!(api, aclrtRecordNotify(null, null)),
            "notify-wait" => opt!(api, aclrtWaitAndResetNotify(null, null, 1)),
            "notify-batch-reset" => opt!(api, aclrtNotifyBatchReset(ptr::null_mut(), 1)),
            "version" => opt!(
                api,
                aclrtGetVersion(ptr::null_mut(), ptr::null_mut(), ptr::null_mut())
            ),
            "version-str" => opt!(api, aclsysGetVersionStr(ptr::null_mut(), ptr::null_mut())),
            "mem-info-free" => {
                let mut total = 0usize;
                opt!(api, aclrtGetMemInfo(1, ptr::null_mut(), &mut total))
            }
            "mem-info-total" => {
                let mut free = 0usize;
                opt!(api, aclrtGetMemInfo(1, &mut free, ptr::null_mut()))
            }
            "malloc-host" => opt!(api, aclrtMallocHost(ptr::null_mut(), 64)),
            "free-host" => opt!(api, aclrtFreeHost(null)),
            "stream-destroy-force" => opt!(api, aclrtDestroyStreamForce(null)),
            "event-create" => opt!(api, aclrtCreateEventExWithFlag(ptr::null_mut(), 0x40)),
            "event-create-flag" => opt!(api, aclrtCreateEventWithFlag(ptr::null_mut(), 0x1)),
            "event-destroy" => opt!(api, aclrtDestroyEvent(null)),
            "event-record" => opt!(api, aclrtRecordEvent(null, null)),
            "event-wait" => opt!(api, aclrtStreamWaitEvent(null, null)),
            "event-sync" => opt!(api, aclrtSynchronizeEvent(null)),
            "event-query" => {
                let mut status = 0;
                opt!(api, aclrtQueryEventStatus(null, &mut status))
            }
            "event-handle" => {
                let mut h = aclrtIpcEventHandle::default();
                opt!(api, aclrtIpcGetEventHandle(null, &mut h))
            }
            "event-open" => opt!(
                api,
                aclrtIpcOpenEventHandle(aclrtIpcEventHandle::default(), ptr::null_mut())
            ),
            other => return Err((-1, format!("shell: no NULL case {other:?}"))),
        };
        self.status(code, vec![])
    }
}

/// The NULL-pointer cases of [`Shell::null_call`].
pub const NULL_CASES: &[&str] = &[
    "get-device",
    "device-count",
    "malloc",
    "free",
    "memcpy-dst",
    "memcpy-src",
    "memcpy-async-dst",
    "memcpy-async-src",
    "memset",
    "stream-create",
    "stream-destroy",
    "malloc-physical-handle",
    "malloc-physical-prop",
    "free-physical",
    "reserve",
    "release-address",
    "map",
    "unmap",
    "can-access",
    "range",
    "granularity",
    "set-access",
    "export",
    "import",
    "key-export",
    "key-set-pid",
    "key-import",
    "key-close",
    "bare-tgid",
    "notify-create",
    "notify-destroy",
    "notify-export",
    "notify-set-pid",
    "notify-import",
    "notify-record",
    "notify-wait",
    "notify-batch-reset",
    "version",
    "version-str",
    "mem-info-free",
    "mem-info-total",
    "malloc-host",
    "free-host",
    "stream-destroy-force",
    "event-create",
    "event-create-flag",
    "event-destroy",
    "event-record",
    "event-wait",
    "event-sync",
    "event-query",
    "event-handle",
    "event-open",
];
