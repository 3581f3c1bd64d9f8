//! The backend against a scripted fake ACL runtime: a module with every function of the
//! list, turned into an `AclApi` with `acl_api_from_module!`. Each fake function records
//! its call, returns a code the test forced (or success) and writes plausible outputs, so
//! the tests see exactly which vendor calls the backend makes, in which order, and how it
//! maps their failures: start-up (`aclInit` repeat tolerated, `aclFinalize` only when
//! devipc initialised ACL, no device), error names and messages, optional symbols absent,
//! device binding and restoring, rollback after a failed step, the one-export rule, key
//! payloads, the notify timeout, and the staged copies of cross-device key imports.
//!
//! The fake keeps its state per thread (each test drives the backend from its own
//! thread). The process-wide `aclInit` accounting of the backend is keyed by the
//! runtime's `aclFinalize`, which every fake table shares, so every test is
//! `#[serial]`.

use devipc_testkit::RawIo;
use std::sync::Arc;
use std::time::Duration;

use devipc_ascend::AscendBackend;
use devipc_ascend::sys::{AclApi, acl_api_from_module};
use devipc_core::token::{MemTokenParts, SignalTokenParts};
use devipc_core::{
    Allocation, DeviceId, DeviceIpc, DevicePtr, Error, ExportOptions, Mechanism, MemToken,
    ProcessId, RawStream, RuntimeVersion, SignalToken, TokenOrigin,
};
use serial_test::serial;

#[allow(
    non_snake_case,
    clippy::missing_safety_doc,
    reason = "the vendor's function and parameter names"
)]
mod fake {
    use std::cell::RefCell;
    use std::collections::HashMap;
    use std::ffi::{CStr, CString};

    use devipc_ascend_sys::types::*;

    /// One recorded copy.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct CopyCall {
        pub dst: usize,
        pub dest_max: usize,
        pub src: usize,
        pub count: usize,
        pub kind: aclrtMemcpyKind,
        /// The stream of an `aclrtMemcpyAsync` (0: the default stream); `None` for a
        /// synchronous `aclrtMemcpy`.
        pub stream: Option<usize>,
    }

    /// The fake runtime's state for the current thread.
    pub struct Fake {
        /// Every call, as `name` or `name(detail)`.
        pub calls: Vec<String>,
        /// Codes forced per function (returned on every call until removed).
        pub fail: HashMap<&'static str, aclError>,
        /// A code forced on the n-th call (1-based, counted from when it was set) of a
        /// function only.
        pub fail_nth: HashMap<&'static str, (usize, aclError)>,
        /// Calls per function since its `fail_nth` entry was set.
        pub seen: HashMap<&'static str, usize>,
        /// Every `aclrtMemcpy` / `aclrtMemcpyAsync`, with its addresses.
        pub copies: Vec<CopyCall>,
        /// The address the last `aclrtMalloc` returned.
        pub last_malloc: usize,
        /// The handle the last `aclrtCreateStream` returned.
        pub last_stream: usize,
        /// What `aclGetRecentErrMsg` returns.
        pub message: Option<CString>,
        pub device_count: u32,
        pub current: Option<i32>,
        pub next_addr: usize,
        pub granularity: usize,
        pub bare_tgid: i32,
        /// What `aclrtIpcMemGetExportKey` / `aclrtNotifyGetExportKey` write.
        pub key: [u8; 65],
        /// What `aclrtMemGetAddressRange` reports: (base, size), except at an address
        /// `aclrtIpcMemImportByKey` returned.
        pub block: (usize, usize),
        /// The addresses `aclrtIpcMemImportByKey` returned.
        pub key_imports: Vec<usize>,
        /// What `aclrtMemGetAddressRange` reports as the size of a key import.
        pub key_import_size: usize,
        /// When set, `aclrtMemGetAddressRange` reports a block of this size starting at
        /// whatever address it is asked about.
        pub range_at_ptr: Option<usize>,
        /// `aclrtNotifyImportByKey` rejects flags above this with 100000, as the ACL
        /// wrapper of the open-source CANN runtime does for flags above 1.
        pub notify_import_flag_limit: Option<u64>,
    }

    impl Default for Fake {
        fn default() -> Self {
            let mut key = [0u8; 65];
            key[..4].copy_from_slice(b"key\0");
            key[4..8].copy_from_slice(b"tail");
            Fake {
                calls: Vec::new(),
                fail: HashMap::new(),
                fail_nth: HashMap::new(),
                seen: HashMap::new(),
                copies: Vec::new(),
                last_malloc: 0,
                last_stream: 0,
                message: None,
                device_count: 2,
                current: None,
                next_addr: 0x10_0000_0000,
                granularity: 2 << 20,
                bare_tgid: 4242,
                key,
                block: (0x20_0000_0000, 1 << 20),
                key_imports: Vec::new(),
                key_import_size: 1 << 20,
                range_at_ptr: None,
                notify_import_flag_limit: None,
            }
        }
    }

    thread_local! {
        pub static FAKE: RefCell<Fake> = RefCell::new(Fake::default());
    }

    pub fn with<R>(f: impl FnOnce(&mut Fake) -> R) -> R {
        FAKE.with(|s| f(&mut s.borrow_mut()))
    }

    /// Records a call and returns the forced code (0 if none).
    fn enter(name: &'static str, detail: String) -> aclError {
        with(|s| {
            s.calls.push(if detail.is_empty() {
                name.to_owned()
            } else {
                format!("{name}({detail})")
            });
            if let Some(&(n, code)) = s.fail_nth.get(name) {
                let seen = s.seen.entry(name).or_default();
                *seen += 1;
                if *seen == n {
                    return code;
                }
            }
            s.fail.get(name).copied().unwrap_or(0)
        })
    }

    fn next_addr(size: usize) -> usize {
        with(|s| {
            let a = s.next_addr;
            s.next_addr += size.max(1).next_multiple_of(1 << 21);
            a
        })
    }

    macro_rules! forced {
        ($name:literal $(, $detail:expr)?) => {{
            let code = enter($name, String::new() $(+ &$detail)?);
            if code != 0 {
                return code;
            }
        }};
    }

    pub unsafe extern "C" fn aclInit(_configPath: *const c_char) -> aclError {
        forced!("aclInit");
        0
    }
    pub unsafe extern "C" fn aclFinalize() -> aclError {
        forced!("aclFinalize");
        0
    }
    pub unsafe extern "C" fn aclGetRecentErrMsg() -> *const c_char {
        with(|s| s.message.as_ref().map_or(std::ptr::null(), |m| m.as_ptr()))
    }
    pub unsafe extern "C" fn aclrtSetDevice(deviceId: i32) -> aclError {
        forced!("aclrtSetDevice", deviceId.to_string());
        with(|s| s.current = Some(deviceId));
        0
    }
    pub unsafe extern "C" fn aclrtResetDevice(deviceId: i32) -> aclError {
        forced!("aclrtResetDevice", deviceId.to_string());
        0
    }
    pub unsafe extern "C" fn aclrtGetDevice(deviceId: *mut i32) -> aclError {
        forced!("aclrtGetDevice");
        match with(|s| s.current) {
            Some(d) => {
                // SAFETY: the caller (the backend) passes pointers valid for this access, as
                // the function's ACL contract requires.
                unsafe { *deviceId = d };
                0
            }
            None => 107002,
        }
    }
    pub unsafe extern "C" fn aclrtGetDeviceCount(count: *mut u32) -> aclError {
        forced!("aclrtGetDeviceCount");
        // SAFETY: the caller (the backend) passes pointers valid for this access, as
        // the function's ACL contract requires.
        unsafe { *count = with(|s| s.device_count) };
        0
    }
    pub unsafe extern "C" fn aclrtMalloc(
        devPtr: *mut *mut c_void,
        size: usize,
        policy: aclrtMemMallocPolicy,
    ) -> aclError {
        forced!("aclrtMalloc", format!("{size},{policy}"));
        let addr = next_addr(size);
        with(|s| s.last_malloc = addr);
        // SAFETY: the caller (the backend) passes pointers valid for this access, as
        // the function's ACL contract requires.
        unsafe { *devPtr = addr as *mut c_void };
        0
    }
    pub unsafe extern "C" fn aclrtFree(devPtr: *mut c_void) -> aclError {
        forced!("aclrtFree", format!("{devPtr:p}"));
        0
    }
    pub unsafe extern "C" fn aclrtMemcpy(
        dst: *mut c_void,
        destMax: usize,
        src: *const c_void,
        count: usize,
        kind: aclrtMemcpyKind,
    ) -> aclError {
        forced!("aclrtMemcpy", format!("{destMax},{count},{kind}"));
        with(|s| {
            s.copies.push(CopyCall {
                dst: dst.addr(),
                dest_max: destMax,
                src: src.addr(),
                count,
                kind,
                stream: None,
            })
        });
        0
    }
    pub unsafe extern "C" fn aclrtMemcpyAsync(
        dst: *mut c_void,
        destMax: usize,
        src: *const c_void,
        count: usize,
        kind: aclrtMemcpyKind,
        stream: aclrtStream,
    ) -> aclError {
        forced!("aclrtMemcpyAsync", format!("{destMax},{count},{kind}"));
        with(|s| {
            s.copies.push(CopyCall {
                dst: dst.addr(),
                dest_max: destMax,
                src: src.addr(),
                count,
                kind,
                stream: Some(stream.addr()),
            })
        });
        0
    }
    pub unsafe extern "C" fn aclrtMemset(
        _devPtr: *mut c_void,
        _maxCount: usize,
        _value: i32,
        _count: usize,
    ) -> aclError {
        forced!("aclrtMemset");
        0
    }
    pub unsafe extern "C" fn aclrtCreateStream(stream: *mut aclrtStream) -> aclError {
        forced!("aclrtCreateStream");
        let addr = next_addr(1);
        with(|s| s.last_stream = addr);
        // SAFETY: the caller (the backend) passes pointers valid for this access, as
        // the function's ACL contract requires.
        unsafe { *stream = addr as aclrtStream };
        0
    }
    pub unsafe extern "C" fn aclrtDestroyStream(stream: aclrtStream) -> aclError {
        forced!("aclrtDestroyStream", format!("{stream:p}"));
        0
    }
    pub unsafe extern "C" fn aclrtSynchronizeStream(stream: aclrtStream) -> aclError {
        forced!("aclrtSynchronizeStream", format!("{stream:p}"));
        0
    }
    pub unsafe extern "C" fn aclrtMallocPhysical(
        handle: *mut aclrtDrvMemHandle,
        size: usize,
        prop: *const aclrtPhysicalMemProp,
        flags: u64,
    ) -> aclError {
        // SAFETY: the caller (the backend) passes pointers valid for this access, as
        // the function's ACL contract requires.
        let prop = unsafe { *prop };
        forced!(
            "aclrtMallocPhysical",
            format!(
                "{size},dev{},attr{},{flags}",
                prop.location.id, prop.memAttr
            )
        );
        // SAFETY: the caller (the backend) passes pointers valid for this access, as
        // the function's ACL contract requires.
        unsafe { *handle = next_addr(1) as aclrtDrvMemHandle };
        0
    }
    pub unsafe extern "C" fn aclrtFreePhysical(_handle: aclrtDrvMemHandle) -> aclError {
        forced!("aclrtFreePhysical");
        0
    }
    pub unsafe extern "C" fn aclrtReserveMemAddress(
        virPtr: *mut *mut c_void,
        size: usize,
        _alignment: usize,
        _expectPtr: *mut c_void,
        _flags: u64,
    ) -> aclError {
        forced!("aclrtReserveMemAddress", size.to_string());
        // SAFETY: the caller (the backend) passes pointers valid for this access, as
        // the function's ACL contract requires.
        unsafe { *virPtr = next_addr(size) as *mut c_void };
        0
    }
    pub unsafe extern "C" fn aclrtReleaseMemAddress(_virPtr: *mut c_void) -> aclError {
        forced!("aclrtReleaseMemAddress");
        0
    }
    pub unsafe extern "C" fn aclrtMapMem(
        _virPtr: *mut c_void,
        size: usize,
        _offset: usize,
        _handle: aclrtDrvMemHandle,
        _flags: u64,
    ) -> aclError {
        forced!("aclrtMapMem", size.to_string());
        0
    }
    pub unsafe extern "C" fn aclrtUnmapMem(_virPtr: *mut c_void) -> aclError {
        forced!("aclrtUnmapMem");
        0
    }
    pub unsafe extern "C" fn aclrtDeviceCanAccessPeer(
        canAccessPeer: *mut i32,
        _deviceId: i32,
        _peerDeviceId: i32,
    ) -> aclError {
        forced!("aclrtDeviceCanAccessPeer");
        // SAFETY: the caller (the backend) passes pointers valid for this access, as
        // the function's ACL contract requires.
        unsafe { *canAccessPeer = 1 };
        0
    }
    pub unsafe extern "C" fn aclrtDeviceEnablePeerAccess(
        peerDeviceId: i32,
        flags: u32,
    ) -> aclError {
        let current = with(|s| s.current).unwrap_or(-1);
        forced!(
            "aclrtDeviceEnablePeerAccess",
            format!("{current}->{peerDeviceId},{flags}")
        );
        0
    }
    pub unsafe extern "C" fn aclrtMemGetAddressRange(
        ptr: *mut c_void,
        pbase: *mut *mut c_void,
        psize: *mut usize,
    ) -> aclError {
        forced!("aclrtMemGetAddressRange");
        let (base, size) = with(|s| {
            if let Some(size) = s.range_at_ptr {
                (ptr as usize, size)
            } else if s.key_imports.contains(&(ptr as usize)) {
                (ptr as usize, s.key_import_size)
            } else {
                s.block
            }
        });
        // SAFETY: the caller (the backend) passes pointers valid for this access, as
        // the function's ACL contract requires.
        unsafe {
            *pbase = base as *mut c_void;
            *psize = size;
        }
        0
    }
    pub unsafe extern "C" fn aclrtMemGetAllocationGranularity(
        _prop: *mut aclrtPhysicalMemProp,
        option: aclrtMemGranularityOptions,
        granularity: *mut usize,
    ) -> aclError {
        forced!("aclrtMemGetAllocationGranularity", option.to_string());
        // SAFETY: the caller (the backend) passes pointers valid for this access, as
        // the function's ACL contract requires.
        unsafe { *granularity = with(|s| s.granularity) };
        0
    }
    pub unsafe extern "C" fn aclrtMemSetAccess(
        _virPtr: *mut c_void,
        size: usize,
        desc: *mut aclrtMemAccessDesc,
        count: usize,
    ) -> aclError {
        // SAFETY: the caller (the backend) passes pointers valid for this access, as
        // the function's ACL contract requires.
        let desc = unsafe { *desc };
        forced!(
            "aclrtMemSetAccess",
            format!("{size},dev{},flags{},{count}", desc.location.id, desc.flags)
        );
        0
    }
    pub unsafe extern "C" fn aclrtMemExportToShareableHandle(
        _handle: aclrtDrvMemHandle,
        handleType: aclrtMemHandleType,
        flags: u64,
        shareableHandle: *mut u64,
    ) -> aclError {
        forced!(
            "aclrtMemExportToShareableHandle",
            format!("{handleType},{flags}")
        );
        // SAFETY: the caller (the backend) passes pointers valid for this access, as
        // the function's ACL contract requires.
        unsafe { *shareableHandle = 0x5eed };
        0
    }
    pub unsafe extern "C" fn aclrtMemSetPidToShareableHandle(
        shareableHandle: u64,
        pid: *mut i32,
        pidNum: usize,
    ) -> aclError {
        // SAFETY: the caller (the backend) passes pointers valid for this access, as
        // the function's ACL contract requires.
        let pids = unsafe { std::slice::from_raw_parts(pid, pidNum) };
        forced!(
            "aclrtMemSetPidToShareableHandle",
            format!("{shareableHandle:#x},{pids:?}")
        );
        0
    }
    pub unsafe extern "C" fn aclrtMemImportFromShareableHandle(
        shareableHandle: u64,
        deviceId: i32,
        handle: *mut aclrtDrvMemHandle,
    ) -> aclError {
        forced!(
            "aclrtMemImportFromShareableHandle",
            format!("{shareableHandle:#x},{deviceId}")
        );
        // SAFETY: the caller (the backend) passes pointers valid for this access, as
        // the function's ACL contract requires.
        unsafe { *handle = next_addr(1) as aclrtDrvMemHandle };
        0
    }
    pub unsafe extern "C" fn aclrtIpcMemGetExportKey(
        devPtr: *mut c_void,
        size: usize,
        key: *mut c_char,
        len: usize,
        flags: u64,
    ) -> aclError {
        forced!(
            "aclrtIpcMemGetExportKey",
            format!("{devPtr:p},{size},{len},{flags}")
        );
        let bytes = with(|s| s.key);
        // SAFETY: the caller (the backend) passes pointers valid for this access, as
        // the function's ACL contract requires.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), key.cast::<u8>(), len.min(65)) };
        0
    }
    pub unsafe extern "C" fn aclrtIpcMemSetImportPid(
        key: *const c_char,
        pid: *mut i32,
        num: usize,
    ) -> aclError {
        // SAFETY: the caller (the backend) passes pointers valid for this access, as
        // the function's ACL contract requires.
        let key = unsafe { CStr::from_ptr(key) }
            .to_string_lossy()
            .into_owned();
        // SAFETY: the caller (the backend) passes pointers valid for this access, as
        // the function's ACL contract requires.
        let pids = unsafe { std::slice::from_raw_parts(pid, num) };
        forced!("aclrtIpcMemSetImportPid", format!("{key},{pids:?}"));
        0
    }
    pub unsafe extern "C" fn aclrtIpcMemImportByKey(
        devPtr: *mut *mut c_void,
        key: *const c_char,
        flags: u64,
    ) -> aclError {
        // SAFETY: the caller (the backend) passes pointers valid for this access, as
        // the function's ACL contract requires.
        let key = unsafe { CStr::from_ptr(key) }
            .to_string_lossy()
            .into_owned();
        let current = with(|s| s.current).unwrap_or(-1);
        forced!(
            "aclrtIpcMemImportByKey",
            format!("{key},{flags},on{current}")
        );
        let addr = next_addr(1 << 20);
        with(|s| s.key_imports.push(addr));
        // SAFETY: as above.
        unsafe { *devPtr = addr as *mut c_void };
        0
    }
    pub unsafe extern "C" fn aclrtIpcMemClose(key: *const c_char) -> aclError {
        // SAFETY: the caller (the backend) passes pointers valid for this access, as
        // the function's ACL contract requires.
        let key = unsafe { CStr::from_ptr(key) }
            .to_string_lossy()
            .into_owned();
        forced!("aclrtIpcMemClose", key);
        0
    }
    pub unsafe extern "C" fn aclrtDeviceGetBareTgid(pid: *mut i32) -> aclError {
        forced!("aclrtDeviceGetBareTgid");
        // SAFETY: the caller (the backend) passes pointers valid for this access, as
        // the function's ACL contract requires.
        unsafe { *pid = with(|s| s.bare_tgid) };
        0
    }
    pub unsafe extern "C" fn aclrtCreateNotify(notify: *mut aclrtNotify, flag: u64) -> aclError {
        forced!("aclrtCreateNotify", flag.to_string());
        // SAFETY: the caller (the backend) passes pointers valid for this access, as
        // the function's ACL contract requires.
        unsafe { *notify = next_addr(1) as aclrtNotify };
        0
    }
    pub unsafe extern "C" fn aclrtDestroyNotify(_notify: aclrtNotify) -> aclError {
        forced!("aclrtDestroyNotify");
        0
    }
    pub unsafe extern "C" fn aclrtNotifyGetExportKey(
        _notify: aclrtNotify,
        key: *mut c_char,
        len: usize,
        flags: u64,
    ) -> aclError {
        forced!("aclrtNotifyGetExportKey", format!("{len},{flags:#x}"));
        let bytes = with(|s| s.key);
        // SAFETY: the caller (the backend) passes pointers valid for this access, as
        // the function's ACL contract requires.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), key.cast::<u8>(), len.min(65)) };
        0
    }
    pub unsafe extern "C" fn aclrtNotifySetImportPid(
        _notify: aclrtNotify,
        pid: *mut i32,
        num: usize,
    ) -> aclError {
        // SAFETY: the caller (the backend) passes pointers valid for this access, as
        // the function's ACL contract requires.
        let pids = unsafe { std::slice::from_raw_parts(pid, num) };
        forced!("aclrtNotifySetImportPid", format!("{pids:?}"));
        0
    }
    pub unsafe extern "C" fn aclrtNotifyImportByKey(
        notify: *mut aclrtNotify,
        _key: *const c_char,
        flags: u64,
    ) -> aclError {
        forced!("aclrtNotifyImportByKey", format!("{flags:#x}"));
        if with(|s| s.notify_import_flag_limit).is_some_and(|limit| flags > limit) {
            return 100000;
        }
        // SAFETY: the caller (the backend) passes pointers valid for this access, as
        // the function's ACL contract requires.
        unsafe { *notify = next_addr(1) as aclrtNotify };
        0
    }
    pub unsafe extern "C" fn aclrtRecordNotify(
        _notify: aclrtNotify,
        _stream: aclrtStream,
    ) -> aclError {
        forced!("aclrtRecordNotify");
        0
    }
    pub unsafe extern "C" fn aclrtWaitAndResetNotify(
        _notify: aclrtNotify,
        _stream: aclrtStream,
        timeout: u32,
    ) -> aclError {
        forced!("aclrtWaitAndResetNotify", timeout.to_string());
        0
    }
    pub unsafe extern "C" fn aclrtGetVersion(
        majorVersion: *mut i32,
        minorVersion: *mut i32,
        patchVersion: *mut i32,
    ) -> aclError {
        forced!("aclrtGetVersion");
        // SAFETY: the caller (the backend) passes pointers valid for this access, as
        // the function's ACL contract requires.
        unsafe {
            *majorVersion = 1;
            *minorVersion = 16;
            *patchVersion = 0;
        }
        0
    }
    pub unsafe extern "C" fn aclsysGetVersionStr(
        pkgName: *mut c_char,
        versionStr: *mut c_char,
    ) -> aclError {
        // SAFETY: the caller (the backend) passes pointers valid for this access, as
        // the function's ACL contract requires.
        let pkg = unsafe { CStr::from_ptr(pkgName) }
            .to_string_lossy()
            .into_owned();
        forced!("aclsysGetVersionStr", pkg);
        let v = b"8.3.RC1\0";
        // SAFETY: the caller (the backend) passes pointers valid for this access, as
        // the function's ACL contract requires.
        unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), versionStr.cast::<u8>(), v.len()) };
        0
    }

    // The rest of the list: the backend never calls these; they record the call only.
    pub unsafe extern "C" fn aclrtSynchronizeDevice() -> aclError {
        forced!("aclrtSynchronizeDevice");
        0
    }
    pub unsafe extern "C" fn aclrtSynchronizeDeviceWithTimeout(timeout: i32) -> aclError {
        forced!("aclrtSynchronizeDeviceWithTimeout", timeout.to_string());
        0
    }
    pub unsafe extern "C" fn aclrtGetMemInfo(
        _attr: aclrtMemAttr,
        _free: *mut usize,
        _total: *mut usize,
    ) -> aclError {
        forced!("aclrtGetMemInfo");
        0
    }
    pub unsafe extern "C" fn aclrtMallocHost(_hostPtr: *mut *mut c_void, _size: usize) -> aclError {
        forced!("aclrtMallocHost");
        0
    }
    pub unsafe extern "C" fn aclrtFreeHost(_hostPtr: *mut c_void) -> aclError {
        forced!("aclrtFreeHost");
        0
    }
    pub unsafe extern "C" fn aclrtDestroyStreamForce(_stream: aclrtStream) -> aclError {
        forced!("aclrtDestroyStreamForce");
        0
    }
    pub unsafe extern "C" fn aclrtResetDeviceForce(deviceId: i32) -> aclError {
        forced!("aclrtResetDeviceForce", deviceId.to_string());
        0
    }
    pub unsafe extern "C" fn aclrtCreateEventExWithFlag(
        event: *mut aclrtEvent,
        flag: u32,
    ) -> aclError {
        forced!("aclrtCreateEventExWithFlag", flag.to_string());
        // SAFETY: the caller (the backend) passes pointers valid for this access, as
        // the function's ACL contract requires.
        unsafe { *event = next_addr(1) as aclrtEvent };
        0
    }
    pub unsafe extern "C" fn aclrtDestroyEvent(_event: aclrtEvent) -> aclError {
        forced!("aclrtDestroyEvent");
        0
    }
    pub unsafe extern "C" fn aclrtRecordEvent(
        _event: aclrtEvent,
        _stream: aclrtStream,
    ) -> aclError {
        forced!("aclrtRecordEvent");
        0
    }
    pub unsafe extern "C" fn aclrtStreamWaitEvent(
        _stream: aclrtStream,
        _event: aclrtEvent,
    ) -> aclError {
        forced!("aclrtStreamWaitEvent");
        0
    }
    pub unsafe extern "C" fn aclrtSynchronizeEvent(_event: aclrtEvent) -> aclError {
        forced!("aclrtSynchronizeEvent");
        0
    }
    pub unsafe extern "C" fn aclrtQueryEventStatus(
        _event: aclrtEvent,
        status: *mut aclrtEventRecordedStatus,
    ) -> aclError {
        forced!("aclrtQueryEventStatus");
        // The fake's stream tasks complete at once.
        // SAFETY: the caller (the backend) passes pointers valid for this access, as
        // the function's ACL contract requires.
        unsafe { *status = ACL_EVENT_RECORDED_STATUS_COMPLETE };
        0
    }
    pub unsafe extern "C" fn aclrtIpcGetEventHandle(
        _event: aclrtEvent,
        _handle: *mut aclrtIpcEventHandle,
    ) -> aclError {
        forced!("aclrtIpcGetEventHandle");
        0
    }
    pub unsafe extern "C" fn aclrtIpcOpenEventHandle(
        _handle: aclrtIpcEventHandle,
        _event: *mut aclrtEvent,
    ) -> aclError {
        forced!("aclrtIpcOpenEventHandle");
        0
    }
}

/// A fresh fake runtime state for this thread, and a table over it.
fn fake_api() -> AclApi {
    fake::with(|s| *s = fake::Fake::default());
    acl_api_from_module!(fake)
}

fn backend(api: AclApi) -> AscendBackend {
    AscendBackend::from_api(Arc::new(api)).expect("the fake runtime starts")
}

fn calls() -> Vec<String> {
    fake::with(|s| std::mem::take(&mut s.calls))
}

fn names(calls: &[String]) -> Vec<&str> {
    calls
        .iter()
        .map(|c| c.split('(').next().unwrap_or(c))
        .collect()
}

fn count(calls: &[String], name: &str) -> usize {
    names(calls).iter().filter(|n| **n == name).count()
}

fn fail(name: &'static str, code: i32) {
    fake::with(|s| {
        s.fail.insert(name, code);
    });
}

fn unfail(name: &'static str) {
    fake::with(|s| {
        s.fail.remove(name);
    });
}

fn set_message(m: &str) {
    fake::with(|s| s.message = Some(std::ffi::CString::new(m).unwrap()));
}

#[test]
#[serial]
fn a_framework_initialised_acl_is_accepted_and_not_finalized() {
    let api = fake_api();
    fail("aclInit", 100002);
    let b = backend(api);
    assert!(!b.initialized_acl());
    drop(b);
    let c = calls();
    assert_eq!(count(&c, "aclInit"), 1, "{c:?}");
    assert_eq!(count(&c, "aclFinalize"), 0, "{c:?}");
}

#[test]
#[serial]
fn acl_is_finalized_once_when_devipc_initialised_it_and_the_last_backend_goes() {
    let first = backend(fake_api());
    assert!(first.initialized_acl());
    // A second backend on the same runtime neither initialises again nor finalizes
    // under the first.
    let second = backend(acl_api_from_module!(fake));
    assert!(second.initialized_acl());
    drop(first);
    assert_eq!(count(&calls(), "aclFinalize"), 0);
    drop(second);
    let c = calls();
    assert_eq!(count(&c, "aclInit"), 0, "{c:?}");
    assert_eq!(count(&c, "aclFinalize"), 1, "{c:?}");
    // A later backend initialises afresh.
    let third = backend(acl_api_from_module!(fake));
    drop(third);
    let c = calls();
    assert_eq!(
        (count(&c, "aclInit"), count(&c, "aclFinalize")),
        (1, 1),
        "{c:?}"
    );
}

#[test]
#[serial]
fn a_failing_init_is_a_vendor_error_with_name_and_runtime_message() {
    let api = fake_api();
    fail("aclInit", 100003);
    set_message("EH0001: config file is broken");
    let err = AscendBackend::from_api(Arc::new(api)).unwrap_err();
    match &err {
        Error::Vendor {
            api,
            code,
            name,
            message,
            ..
        } => {
            assert_eq!(*api, "aclInit");
            assert_eq!(*code, 100003);
            assert_eq!(name, "ACL_ERROR_INVALID_FILE");
            assert_eq!(message, "EH0001: config file is broken");
        }
        other => panic!("expected a vendor error, got {other:?}"),
    }
    assert_eq!(count(&calls(), "aclFinalize"), 0);
}

#[test]
#[serial]
fn no_device_is_a_typed_vendor_error_and_undoes_the_init() {
    let api = fake_api();
    fake::with(|s| s.device_count = 0);
    let err = AscendBackend::from_api(Arc::new(api)).unwrap_err();
    assert_eq!(err.vendor_code(), Some(207004), "{err}");
    assert_eq!(err.vendor_name(), Some("ACL_ERROR_RT_NO_DEVICE"));
    assert!(err.to_string().contains("aclrtGetDeviceCount"), "{err}");
    let c = calls();
    assert_eq!(
        (count(&c, "aclInit"), count(&c, "aclFinalize")),
        (1, 1),
        "{c:?}"
    );

    let api = fake_api();
    fail("aclrtGetDeviceCount", 207004);
    let err = AscendBackend::from_api(Arc::new(api)).unwrap_err();
    assert_eq!(err.vendor_name(), Some("ACL_ERROR_RT_NO_DEVICE"), "{err}");
    // No runtime message: the table's description stands in.
    match err {
        Error::Vendor { message, .. } => assert!(!message.is_empty()),
        other => panic!("{other:?}"),
    }
}

#[test]
#[serial]
fn unknown_codes_are_named_by_number() {
    let b = backend(fake_api());
    fail("aclrtMallocPhysical", 123_456);
    let err = b.allocate(DeviceId(0), 1).unwrap_err();
    assert_eq!(err.vendor_name(), Some("aclError(123456)"), "{err}");
    assert_eq!(err.vendor_code(), Some(123_456));
}

#[test]
#[serial]
fn info_reports_version_and_capabilities() {
    let b = backend(fake_api());
    let info = b.info();
    assert_eq!(info.runtime_version, Some(RuntimeVersion::new(8, 3, 0)));
    assert!(
        info.source.is_emulated(),
        "a module table counts as emulated"
    );
    let caps = info.capabilities;
    assert!(caps.access_control);
    assert!(caps.export_allocation && caps.export_external && caps.signals);
    assert!(caps.disable_pid_validation && caps.cross_device_import);
    assert_eq!(b.device_count().unwrap(), 2);
    assert!(calls().contains(&"aclsysGetVersionStr(runtime)".to_owned()));

    // Without aclsysGetVersionStr, the ACL API version.
    let mut api = fake_api();
    api.aclsysGetVersionStr = None;
    let b = backend(api);
    assert_eq!(
        b.info().runtime_version,
        Some(RuntimeVersion::new(1, 16, 0))
    );
}

#[test]
#[serial]
fn an_old_runtime_reports_missing_families_as_unsupported() {
    let mut api = fake_api();
    api.aclrtMemExportToShareableHandle = None;
    api.aclrtCreateNotify = None;
    api.aclrtIpcMemGetExportKey = None;
    let b = backend(api);
    let caps = b.info().capabilities;
    assert!(!caps.export_allocation && !caps.signals && !caps.export_external);

    let alloc = b.allocate(DeviceId(0), 4096).unwrap();
    let err = b
        .export(&alloc, 0..4096, ExportOptions::default())
        .unwrap_err();
    match &err {
        Error::Unsupported { what, .. } => {
            assert_eq!(
                what,
                "aclrtMemExportToShareableHandle (this CANN is too old)"
            )
        }
        other => panic!("expected Unsupported, got {other:?}"),
    }
    let err = b.create_signal(DeviceId(0)).unwrap_err();
    assert!(
        err.to_string()
            .contains("aclrtCreateNotify (this CANN is too old)"),
        "{err}"
    );
    let err = b
        .export_external(DeviceId(0), DevicePtr(0x1000), 16, ExportOptions::default())
        .unwrap_err();
    assert!(matches!(err, Error::Unsupported { .. }), "{err:?}");
    b.free(alloc).unwrap();
}

#[test]
#[serial]
fn allocate_rounds_to_the_granularity_and_makes_the_documented_calls() {
    let b = backend(fake_api());
    fake::with(|s| s.current = Some(1));
    calls();
    let alloc = b.allocate(DeviceId(0), 5 << 20).unwrap();
    assert_eq!(alloc.size, 6 << 20);
    assert_eq!(alloc.device, DeviceId(0));
    let c = calls();
    assert_eq!(
        c,
        [
            "aclrtGetDevice",
            "aclrtSetDevice(0)",
            "aclrtMemGetAllocationGranularity(0)",
            "aclrtMallocPhysical(6291456,dev0,attr4,0)",
            "aclrtReserveMemAddress(6291456)",
            "aclrtMapMem(6291456)",
            "aclrtMemSetAccess(6291456,dev0,flags3,1)",
            "aclrtSetDevice(1)",
        ]
    );
    // The caller's device is back.
    assert_eq!(fake::with(|s| s.current), Some(1));

    b.free(alloc.clone()).unwrap();
    let c = calls();
    assert_eq!(
        names(&c),
        [
            "aclrtGetDevice",
            "aclrtSetDevice",
            "aclrtUnmapMem",
            "aclrtReleaseMemAddress",
            "aclrtFreePhysical",
            "aclrtSetDevice"
        ]
    );
    let err = b.free(alloc).unwrap_err();
    assert!(
        matches!(
            err,
            Error::UnknownHandle {
                kind: "allocation",
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
#[serial]
fn without_a_granularity_query_sizes_round_to_2_mib_and_access_is_not_set() {
    let mut api = fake_api();
    api.aclrtMemGetAllocationGranularity = None;
    api.aclrtMemSetAccess = None;
    let b = backend(api);
    let alloc = b.allocate(DeviceId(1), 1).unwrap();
    assert_eq!(alloc.size, 2 << 20);
    let c = calls();
    assert_eq!(count(&c, "aclrtMemSetAccess"), 0, "{c:?}");
    // A thread that had no device keeps the one devipc set (see the device module docs).
    assert_eq!(fake::with(|s| s.current), Some(1));
    b.free(alloc).unwrap();
}

#[test]
#[serial]
fn a_failed_step_releases_what_was_acquired_in_reverse() {
    let b = backend(fake_api());
    fail("aclrtMapMem", 107000);
    calls();
    let err = b.allocate(DeviceId(0), 1).unwrap_err();
    assert_eq!(
        err.vendor_name(),
        Some("ACL_ERROR_RT_PARAM_INVALID"),
        "{err}"
    );
    let c = calls();
    let tail: Vec<_> = names(&c)
        .into_iter()
        .skip_while(|n| *n != "aclrtMapMem")
        .collect();
    assert_eq!(
        tail,
        ["aclrtMapMem", "aclrtReleaseMemAddress", "aclrtFreePhysical"]
    );
    unfail("aclrtMapMem");

    fail("aclrtMemSetAccess", 107000);
    b.allocate(DeviceId(0), 1).unwrap_err();
    let c = calls();
    let tail: Vec<_> = names(&c)
        .into_iter()
        .skip_while(|n| *n != "aclrtMemSetAccess")
        .collect();
    assert_eq!(
        tail,
        [
            "aclrtMemSetAccess",
            "aclrtUnmapMem",
            "aclrtReleaseMemAddress",
            "aclrtFreePhysical"
        ]
    );
}

#[test]
#[serial]
fn a_failed_release_keeps_the_handle_and_resumes_where_it_stopped() {
    let b = backend(fake_api());
    let alloc = b.allocate(DeviceId(0), 1).unwrap();
    fail("aclrtReleaseMemAddress", 107000);
    calls();
    b.free(alloc.clone()).unwrap_err();
    unfail("aclrtReleaseMemAddress");
    b.free(alloc).unwrap();
    let c = calls();
    // The unmap that succeeded the first time is not repeated.
    assert_eq!(count(&c, "aclrtUnmapMem"), 1, "{c:?}");
    assert_eq!(count(&c, "aclrtReleaseMemAddress"), 2, "{c:?}");
    assert_eq!(count(&c, "aclrtFreePhysical"), 1, "{c:?}");
}

#[test]
#[serial]
fn an_allocation_is_exported_once_and_its_handle_reused() {
    let b = backend(fake_api());
    let alloc = b.allocate(DeviceId(1), 4 << 20).unwrap();
    calls();
    let t1 = b.export(&alloc, 0..4096, ExportOptions::default()).unwrap();
    let t2 = b
        .export(&alloc, 4096..8192, ExportOptions::default())
        .unwrap();
    let c = calls();
    assert_eq!(count(&c, "aclrtMemExportToShareableHandle"), 1, "{c:?}");
    assert!(
        c.contains(&"aclrtMemExportToShareableHandle(0,0)".to_owned()),
        "{c:?}"
    );
    assert_eq!(t1.payload(), t2.payload());
    assert_eq!(t1.payload(), 0x5eed_u64.to_le_bytes());
    assert_eq!(t1.mechanism(), Mechanism::AscendVmm);
    assert_eq!(
        (t2.offset(), t2.len(), t2.object_size()),
        (4096, 4096, 4 << 20)
    );
    assert_eq!(t1.generation(), alloc.id.get());
    assert_eq!(t1.device(), DeviceId(1));
    assert_eq!(t1.origin().pid, ProcessId(4242), "the bare tgid");
    assert_eq!(b.process_id().unwrap(), ProcessId(4242));

    let err = b
        .export(&alloc, 0..16, ExportOptions::any_process())
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    assert!(err.to_string().contains("one shareable handle"), "{err}");

    let err = b
        .export(&alloc, 0..(4 << 20) + 1, ExportOptions::default())
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");

    // any_process on a fresh allocation sets the VMM flag 0x1.
    let other = b.allocate(DeviceId(0), 1).unwrap();
    calls();
    b.export(&other, 0..1, ExportOptions::any_process())
        .unwrap();
    assert!(calls().contains(&"aclrtMemExportToShareableHandle(0,1)".to_owned()));
}

#[test]
#[serial]
fn grant_passes_the_pids_and_an_empty_list_is_a_no_op() {
    let b = backend(fake_api());
    let alloc = b.allocate(DeviceId(0), 1).unwrap();
    let token = b.export(&alloc, 0..1, ExportOptions::default()).unwrap();
    calls();
    b.grant(&token, &[ProcessId(7), ProcessId(8)]).unwrap();
    b.grant(&token, &[]).unwrap();
    let c = calls();
    assert!(
        c.contains(&"aclrtMemSetPidToShareableHandle(0x5eed,[7, 8])".to_owned()),
        "{c:?}"
    );
    assert_eq!(count(&c, "aclrtMemSetPidToShareableHandle"), 1);
    let err = b.grant(&token, &[ProcessId(u32::MAX)]).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
}

#[test]
#[serial]
fn a_cross_device_import_enables_peer_access_once_then_maps() {
    let b = backend(fake_api());
    let (alloc, token) = exported_vmm_token(&b, DeviceId(1));
    calls();
    let m = b.import(&token, DeviceId(0)).unwrap();
    assert_eq!(m.len, 4096);
    let c = calls();
    let n = names(&c);
    let peer = n
        .iter()
        .position(|x| *x == "aclrtDeviceEnablePeerAccess")
        .unwrap();
    let import = n
        .iter()
        .position(|x| *x == "aclrtMemImportFromShareableHandle")
        .unwrap();
    assert!(peer < import, "{c:?}");
    assert!(
        c.contains(&"aclrtDeviceEnablePeerAccess(0->1,0)".to_owned()),
        "{c:?}"
    );
    assert!(
        c.contains(&"aclrtMemImportFromShareableHandle(0x5eed,0)".to_owned()),
        "{c:?}"
    );
    assert!(
        c.contains(&"aclrtReserveMemAddress(2097152)".to_owned()),
        "{c:?}"
    );
    b.close(m.clone()).unwrap();
    let m2 = b.import(&token, DeviceId(0)).unwrap();
    assert_eq!(count(&calls(), "aclrtDeviceEnablePeerAccess"), 0);
    assert_eq!(m2.ptr.0 % (2 << 20), 8192, "base + offset");
    b.close(m2).unwrap();
    let err = b.close(m).unwrap_err();
    assert!(
        matches!(
            err,
            Error::UnknownHandle {
                kind: "mapping",
                ..
            }
        ),
        "{err:?}"
    );
    b.free(alloc).unwrap();
}

/// An allocation of this backend on `device` and its token for the range 8192..12288 (the
/// fake runtime lets a process import its own export; the export writes the record an
/// import checks).
fn exported_vmm_token(b: &AscendBackend, device: DeviceId) -> (Allocation, MemToken) {
    let alloc = b.allocate(device, 1).unwrap();
    let token = b
        .export(&alloc, 8192..12288, ExportOptions::any_process())
        .unwrap();
    (alloc, token)
}

/// A VMM token as another process on `device` would send it: handle 0x77, 2 MiB object,
/// range 8192..12288.
fn foreign_vmm_token(b: &AscendBackend, device: DeviceId) -> MemToken {
    MemToken::new(MemTokenParts {
        mechanism: Mechanism::AscendVmm,
        emulated: b.info().source.is_emulated(),
        device,
        origin: TokenOrigin::current(ProcessId(1)),
        generation: 9,
        object_size: 2 << 20,
        offset: 8192,
        len: 4096,
        payload: 0x77_u64.to_le_bytes().to_vec(),
    })
    .unwrap()
}

#[test]
#[serial]
fn tokens_are_checked_before_any_vendor_call() {
    let b = backend(fake_api());
    let good = foreign_vmm_token(&b, DeviceId(0));
    calls();
    // Another backend's mechanism.
    let mut parts = parts_of(&good);
    parts.mechanism = Mechanism::HipIpcMem;
    parts.payload = vec![0; 64];
    let hip = MemToken::new(parts).unwrap();
    assert!(matches!(
        b.import(&hip, DeviceId(0)),
        Err(Error::BackendMismatch { .. })
    ));
    assert!(matches!(
        b.grant(&hip, &[]),
        Err(Error::BackendMismatch { .. })
    ));
    // A real-runtime token on an emulated backend.
    let mut parts = parts_of(&good);
    parts.emulated = false;
    let real = MemToken::new(parts).unwrap();
    let err = b.import(&real, DeviceId(0)).unwrap_err();
    assert!(err.to_string().contains("real ACL runtime"), "{err}");
    // Bad devices.
    assert!(matches!(
        b.import(&good, DeviceId(2)),
        Err(Error::InvalidDevice {
            device: DeviceId(2),
            count: 2
        })
    ));
    let mut parts = parts_of(&good);
    parts.device = DeviceId(5);
    let far = MemToken::new(parts).unwrap();
    assert!(matches!(
        b.import(&far, DeviceId(0)),
        Err(Error::InvalidDevice { .. })
    ));
    // A payload of the wrong size.
    let mut parts = parts_of(&good);
    parts.payload = vec![1, 2, 3];
    let short = MemToken::new(parts).unwrap();
    assert!(matches!(
        b.import(&short, DeviceId(0)),
        Err(Error::InvalidToken { .. })
    ));
    // A key without a NUL.
    let mut parts = parts_of(&good);
    parts.mechanism = Mechanism::AscendIpcKey;
    parts.payload = vec![b'k'; 65];
    let unterminated = MemToken::new(parts).unwrap();
    assert!(matches!(
        b.import(&unterminated, DeviceId(0)),
        Err(Error::InvalidToken { .. })
    ));
    assert!(calls().iter().all(|c| !c.contains("Import")));
    assert!(matches!(
        b.allocate(DeviceId(9), 1),
        Err(Error::InvalidDevice { .. })
    ));
}

fn parts_of(t: &MemToken) -> MemTokenParts {
    MemTokenParts {
        mechanism: t.mechanism(),
        emulated: t.emulated(),
        device: t.device(),
        origin: t.origin(),
        generation: t.generation(),
        object_size: t.object_size(),
        offset: t.offset(),
        len: t.len(),
        payload: t.payload().to_vec(),
    }
}

#[test]
#[serial]
fn external_exports_carry_the_whole_key_and_the_offset_in_the_block() {
    let b = backend(fake_api());
    let (base, _) = fake::with(|s| s.block);
    calls();
    let ptr = DevicePtr(base as u64 + 4096);
    let t = b
        .export_external(DeviceId(1), ptr, 100, ExportOptions::default())
        .unwrap();
    assert_eq!(t.mechanism(), Mechanism::AscendIpcKey);
    assert_eq!(
        t.payload().len(),
        65 + 32,
        "the key buffer, then the lease name"
    );
    assert_eq!(
        &t.payload()[..8],
        b"key\0tail",
        "bytes after the NUL are kept"
    );
    assert_eq!((t.offset(), t.len(), t.object_size()), (4096, 100, 1 << 20));
    let c = calls();
    assert!(
        c.contains(&format!(
            "aclrtIpcMemGetExportKey({:#x},{},65,0)",
            base,
            1 << 20
        )),
        "{c:?}"
    );
    // The same block again reuses its key; the other validation is refused.
    b.export_external(
        DeviceId(1),
        DevicePtr(base as u64),
        1,
        ExportOptions::default(),
    )
    .unwrap();
    assert_eq!(count(&calls(), "aclrtIpcMemGetExportKey"), 0);
    assert!(
        b.export_external(DeviceId(1), ptr, 1, ExportOptions::any_process())
            .is_err()
    );
    b.grant(&t, &[ProcessId(9)]).unwrap();
    assert!(calls().contains(&"aclrtIpcMemSetImportPid(key,[9])".to_owned()));

    // Closing the export (exporter side) needs the device and a pointer in the block.
    assert!(b.close_external(DeviceId(0), ptr).is_err());
    b.close_external(DeviceId(1), ptr).unwrap();
    assert!(calls().contains(&"aclrtIpcMemClose(key)".to_owned()));
    assert!(b.close_external(DeviceId(1), ptr).is_err());
}

#[test]
#[serial]
fn a_key_import_on_another_device_asks_for_peer_access() {
    let b = backend(fake_api());
    let token = exported_key_token(&b, DeviceId(1), 8192, 4096, 16);
    calls();
    let same = b.import(&token, DeviceId(1)).unwrap();
    let cross = b.import(&token, DeviceId(0)).unwrap();
    let c = calls();
    assert!(
        c.contains(&"aclrtIpcMemImportByKey(abc,0,on1)".to_owned()),
        "{c:?}"
    );
    assert!(
        c.contains(&"aclrtIpcMemImportByKey(abc,1,on0)".to_owned()),
        "{c:?}"
    );
    assert_eq!(cross.ptr.0 % 4096, 0, "block base + 4096");
    b.close(same).unwrap();
    b.close(cross).unwrap();
    assert_eq!(count(&calls(), "aclrtIpcMemClose"), 2);
}

#[test]
#[serial]
fn write_and_read_bind_the_device_of_the_range() {
    let b = backend(fake_api());
    let alloc = b.allocate(DeviceId(1), 1).unwrap();
    fake::with(|s| s.current = Some(0));
    calls();
    b.write_raw(alloc.ptr.offset(10).unwrap(), &[1, 2, 3])
        .unwrap();
    let mut buf = [0u8; 4];
    b.read_raw(alloc.ptr, &mut buf).unwrap();
    let c = calls();
    assert_eq!(
        c,
        [
            "aclrtGetDevice",
            "aclrtSetDevice(1)",
            "aclrtMemcpy(3,3,1)",
            "aclrtSetDevice(0)",
            "aclrtGetDevice",
            "aclrtSetDevice(1)",
            "aclrtMemcpy(4,4,2)",
            "aclrtSetDevice(0)",
        ]
    );
    // Memory devipc did not map: the thread's device as it is.
    b.write_raw(DevicePtr(0x1234), &[1]).unwrap();
    assert_eq!(calls(), ["aclrtMemcpy(1,1,1)"]);
    b.free(alloc).unwrap();
}

/// A key token of framework memory this backend exported on `device` (key "abc", an
/// `object_size` block; the fake lets a process import its own export, and the export
/// writes the record an import needs), narrowed to `offset..offset + len`.
fn exported_key_token(
    b: &AscendBackend,
    device: DeviceId,
    object_size: u64,
    offset: u64,
    len: u64,
) -> MemToken {
    const BLOCK: usize = 0x7100_0000;
    let size = object_size as usize;
    fake::with(|s| {
        // The runtime reports the block the key really names: here, what the test asks.
        s.key_import_size = size;
        s.block = (BLOCK, size);
        s.key = [0; 65];
        s.key[..3].copy_from_slice(b"abc");
    });
    let token = b
        .export_external(
            device,
            DevicePtr(BLOCK as u64),
            size,
            ExportOptions::any_process(),
        )
        .unwrap();
    calls();
    token.narrow(offset, len).unwrap()
}

fn copies() -> Vec<fake::CopyCall> {
    fake::with(|s| std::mem::take(&mut s.copies))
}

/// The staging buffer and stream of the last staged copy.
fn staging_and_stream() -> (usize, usize) {
    fake::with(|s| (s.last_malloc, s.last_stream))
}

fn fail_nth(name: &'static str, n: usize, code: i32) {
    fake::with(|s| {
        s.fail_nth.insert(name, (n, code));
        s.seen.remove(name);
    });
}

#[test]
#[serial]
fn a_cross_device_key_import_is_written_and_read_through_a_staging_buffer() {
    let b = backend(fake_api());
    let token = exported_key_token(&b, DeviceId(1), 8192, 4096, 100);
    let cross = b.import(&token, DeviceId(0)).unwrap();
    let same = b.import(&token, DeviceId(1)).unwrap();
    fake::with(|s| s.current = Some(1));
    calls();
    copies();

    let data: Vec<u8> = (0..100).collect();
    b.write_raw(cross.ptr, &data).unwrap();
    let (staging, stream) = staging_and_stream();
    assert_eq!(
        calls(),
        [
            "aclrtGetDevice".to_owned(),
            "aclrtSetDevice(0)".to_owned(),
            "aclrtMalloc(100,0)".to_owned(),
            "aclrtCreateStream".to_owned(),
            "aclrtMemcpy(100,100,1)".to_owned(),
            "aclrtMemcpyAsync(100,100,3)".to_owned(),
            format!("aclrtSynchronizeStream({stream:#x})"),
            format!("aclrtDestroyStream({stream:#x})"),
            format!("aclrtFree({staging:#x})"),
            "aclrtSetDevice(1)".to_owned(),
        ]
    );
    let c = copies();
    assert_eq!(
        c,
        [
            fake::CopyCall {
                dst: staging,
                dest_max: 100,
                src: data.as_ptr().addr(),
                count: 100,
                kind: 1,
                stream: None,
            },
            fake::CopyCall {
                dst: cross.ptr.0 as usize,
                dest_max: 100,
                src: staging,
                count: 100,
                kind: 3,
                stream: Some(stream),
            },
        ]
    );

    let mut back = [0u8; 64];
    b.read_raw(cross.ptr.offset(8).unwrap(), &mut back).unwrap();
    let (staging, stream) = staging_and_stream();
    assert_eq!(
        calls(),
        [
            "aclrtGetDevice".to_owned(),
            "aclrtSetDevice(0)".to_owned(),
            "aclrtMalloc(64,0)".to_owned(),
            "aclrtCreateStream".to_owned(),
            "aclrtMemcpyAsync(64,64,3)".to_owned(),
            format!("aclrtSynchronizeStream({stream:#x})"),
            "aclrtMemcpy(64,64,2)".to_owned(),
            format!("aclrtDestroyStream({stream:#x})"),
            format!("aclrtFree({staging:#x})"),
            "aclrtSetDevice(1)".to_owned(),
        ]
    );
    let c = copies();
    assert_eq!(
        (c[0].dst, c[0].src, c[0].stream),
        (staging, cross.ptr.0 as usize + 8, Some(stream))
    );
    assert_eq!((c[1].dst, c[1].src), (back.as_ptr().addr(), staging));

    // On the exporter's device the plain synchronous copy is allowed.
    b.read_raw(same.ptr, &mut back).unwrap();
    assert_eq!(calls(), ["aclrtGetDevice", "aclrtMemcpy(64,64,2)"]);
    b.close(cross).unwrap();
    b.close(same).unwrap();
}

#[test]
#[serial]
fn large_staged_copies_go_in_bounded_chunks_through_one_buffer() {
    const MIB: usize = 1 << 20;
    assert_eq!(devipc_ascend::staging::STAGING_CHUNK, 4 * MIB);
    let len = 9 * MIB + 5;
    let b = backend(fake_api());
    let token = exported_key_token(&b, DeviceId(1), 16 << 20, 0, 16 << 20);
    let cross = b.import(&token, DeviceId(0)).unwrap();
    let base = cross.ptr.0 as usize;
    let data = vec![7u8; len];
    calls();
    copies();
    b.write_raw(cross.ptr, &data).unwrap();
    let (staging, stream) = staging_and_stream();
    let c = calls();
    assert_eq!(count(&c, "aclrtMalloc"), 1, "{c:?}");
    assert!(c.contains(&format!("aclrtMalloc({},0)", 4 * MIB)), "{c:?}");
    assert_eq!(count(&c, "aclrtCreateStream"), 1, "{c:?}");
    assert_eq!(count(&c, "aclrtSynchronizeStream"), 3, "{c:?}");
    assert_eq!(count(&c, "aclrtDestroyStream"), 1, "{c:?}");
    assert_eq!(count(&c, "aclrtFree"), 1, "{c:?}");
    let chunks = [(0, 4 * MIB), (4 * MIB, 4 * MIB), (8 * MIB, MIB + 5)];
    let mut want = Vec::new();
    for (offset, n) in chunks {
        want.push(fake::CopyCall {
            dst: staging,
            dest_max: 4 * MIB,
            src: data.as_ptr().addr() + offset,
            count: n,
            kind: 1,
            stream: None,
        });
        want.push(fake::CopyCall {
            dst: base + offset,
            dest_max: n,
            src: staging,
            count: n,
            kind: 3,
            stream: Some(stream),
        });
    }
    assert_eq!(copies(), want);

    let mut back = vec![0u8; len];
    b.read_raw(cross.ptr, &mut back).unwrap();
    let (staging, stream) = staging_and_stream();
    let mut want = Vec::new();
    for (offset, n) in chunks {
        want.push(fake::CopyCall {
            dst: staging,
            dest_max: 4 * MIB,
            src: base + offset,
            count: n,
            kind: 3,
            stream: Some(stream),
        });
        want.push(fake::CopyCall {
            dst: back.as_ptr().addr() + offset,
            dest_max: n,
            src: staging,
            count: n,
            kind: 2,
            stream: None,
        });
    }
    assert_eq!(copies(), want);
    let c = calls();
    // Each chunk's async copy is synchronised before the buffer is copied or reused.
    let n = names(&c);
    let order: Vec<&str> = n
        .iter()
        .copied()
        .filter(|x| x.starts_with("aclrtMemcpy") || *x == "aclrtSynchronizeStream")
        .collect();
    assert_eq!(
        order,
        [
            "aclrtMemcpyAsync",
            "aclrtSynchronizeStream",
            "aclrtMemcpy",
            "aclrtMemcpyAsync",
            "aclrtSynchronizeStream",
            "aclrtMemcpy",
            "aclrtMemcpyAsync",
            "aclrtSynchronizeStream",
            "aclrtMemcpy",
        ]
    );
    b.close(cross).unwrap();
}

#[test]
#[serial]
fn a_failing_staged_copy_releases_the_buffer_and_the_stream_and_restores_the_device() {
    let b = backend(fake_api());
    let token = exported_key_token(&b, DeviceId(1), 16 << 20, 0, 16 << 20);
    let cross = b.import(&token, DeviceId(0)).unwrap();
    fake::with(|s| s.current = Some(1));
    let data = vec![1u8; 9 << 20];
    let mut back = vec![0u8; 9 << 20];

    // (function failing, on which call, whether a write (else a read), what is released)
    let cases: [(&'static str, usize, bool, bool, bool); 9] = [
        ("aclrtMalloc", 1, true, false, false),
        ("aclrtCreateStream", 1, true, true, false),
        ("aclrtMemcpy", 1, true, true, true),
        ("aclrtMemcpyAsync", 2, true, true, true),
        ("aclrtSynchronizeStream", 3, true, true, true),
        ("aclrtMemcpyAsync", 1, false, true, true),
        ("aclrtSynchronizeStream", 2, false, true, true),
        ("aclrtMemcpy", 3, false, true, true),
        ("aclrtMalloc", 1, false, false, false),
    ];
    for (name, nth, write, freed, destroyed) in cases {
        calls();
        fail_nth(name, nth, 507_899);
        let err = if write {
            b.write_raw(cross.ptr, &data).unwrap_err()
        } else {
            b.read_raw(cross.ptr, &mut back).unwrap_err()
        };
        let case = format!("{name} #{nth}, write {write}");
        assert!(
            matches!(&err, Error::Vendor { api, code: 507_899, .. } if *api == name),
            "{case}: {err:?}"
        );
        let c = calls();
        assert_eq!(count(&c, "aclrtFree"), usize::from(freed), "{case}: {c:?}");
        assert_eq!(
            count(&c, "aclrtDestroyStream"),
            usize::from(destroyed),
            "{case}: {c:?}"
        );
        if destroyed {
            let n = names(&c);
            let destroy = n.iter().position(|x| *x == "aclrtDestroyStream").unwrap();
            let free = n.iter().position(|x| *x == "aclrtFree").unwrap();
            assert!(destroy < free, "the stream goes before its buffer: {c:?}");
        }
        assert_eq!(
            c.last().map(String::as_str),
            Some("aclrtSetDevice(1)"),
            "{case}"
        );
        assert_eq!(fake::with(|s| s.current), Some(1), "{case}");
        fake::with(|s| s.fail_nth.clear());
    }

    // A release that fails after a complete transfer is the call's error; the other
    // object is still released.
    calls();
    fail("aclrtDestroyStream", 107_017);
    let err = b.write_raw(cross.ptr, &data[..100]).unwrap_err();
    assert_eq!(err.vendor_code(), Some(107_017), "{err}");
    assert!(err.to_string().contains("aclrtDestroyStream"), "{err}");
    assert_eq!(count(&calls(), "aclrtFree"), 1);
    unfail("aclrtDestroyStream");
    fail("aclrtFree", 107_000);
    let err = b.read_raw(cross.ptr, &mut back[..100]).unwrap_err();
    assert!(err.to_string().contains("aclrtFree"), "{err}");
    unfail("aclrtFree");

    // All well again.
    b.write_raw(cross.ptr, &data).unwrap();
    b.close(cross).unwrap();
}

#[test]
#[serial]
fn without_async_copies_a_cross_device_key_import_is_unsupported_for_host_copies() {
    let mut api = fake_api();
    api.aclrtMemcpyAsync = None;
    let b = backend(api);
    assert_eq!(b.api().missing_optional(), ["aclrtMemcpyAsync"]);
    let token = exported_key_token(&b, DeviceId(1), 8192, 0, 8192);
    let cross = b.import(&token, DeviceId(0)).unwrap();
    let same = b.import(&token, DeviceId(1)).unwrap();
    calls();
    let mut buf = [0u8; 16];
    let err = b.read_raw(cross.ptr, &mut buf).unwrap_err();
    match &err {
        Error::Unsupported { what, .. } => {
            assert!(what.contains("aclrtMemcpyAsync"), "{what}");
            assert!(what.contains("another device"), "{what}");
        }
        other => panic!("expected Unsupported, got {other:?}"),
    }
    assert!(matches!(
        b.write_raw(cross.ptr, &buf),
        Err(Error::Unsupported { .. })
    ));
    assert!(calls().is_empty(), "nothing is called before the refusal");
    // Same-device imports and allocations copy as before.
    b.read_raw(same.ptr, &mut buf).unwrap();
    b.write_raw(same.ptr, &buf).unwrap();
    b.close(cross).unwrap();
    b.close(same).unwrap();
}

#[test]
#[serial]
fn notify_export_grant_import_and_wait_use_the_notify_flags_and_seconds() {
    let b = backend(fake_api());
    let s = b.create_signal(DeviceId(0)).unwrap();
    let t = b.export_signal(&s, ExportOptions::any_process()).unwrap();
    assert_eq!(t.mechanism(), Mechanism::AscendNotify);
    assert_eq!(t.payload().len(), 65);
    assert_eq!(t.generation(), s.id.get());
    let c = calls();
    assert!(c.contains(&"aclrtCreateNotify(0)".to_owned()), "{c:?}");
    assert!(
        c.contains(&"aclrtNotifyGetExportKey(65,0x2)".to_owned()),
        "{c:?}"
    );
    // Cached: no second key; the other validation is refused.
    b.export_signal(&s, ExportOptions::any_process()).unwrap();
    assert_eq!(count(&calls(), "aclrtNotifyGetExportKey"), 0);
    assert!(b.export_signal(&s, ExportOptions::default()).is_err());

    b.grant_signal(&t, &[ProcessId(11)]).unwrap();
    assert!(calls().contains(&"aclrtNotifySetImportPid([11])".to_owned()));

    let imported = b.import_signal(&t, DeviceId(1)).unwrap();
    assert!(calls().contains(&"aclrtNotifyImportByKey(0x2)".to_owned()));
    // An imported notify is not exported again, nor granted through its token.
    assert!(matches!(
        b.export_signal(&imported, ExportOptions::default()),
        Err(Error::InvalidArgument { .. })
    ));

    b.notify(&s, RawStream::DEFAULT).unwrap();
    b.wait(&s, RawStream::DEFAULT, Some(Duration::from_millis(1500)))
        .unwrap();
    b.wait(&s, RawStream::DEFAULT, None).unwrap();
    let c = calls();
    assert!(
        c.contains(&"aclrtWaitAndResetNotify(2)".to_owned()),
        "{c:?}"
    );
    assert!(
        c.contains(&"aclrtWaitAndResetNotify(0)".to_owned()),
        "{c:?}"
    );
    assert_eq!(count(&c, "aclrtSynchronizeStream"), 2, "{c:?}");
    // Both waits ran on one stream of devipc's own, created once with its event, with the
    // event recorded after each vendor wait and polled (signal.rs, the wait's deadline).
    assert_eq!(count(&c, "aclrtCreateStream"), 1, "{c:?}");
    assert!(
        c.contains(&"aclrtCreateEventExWithFlag(1)".to_owned()),
        "{c:?}"
    );
    assert_eq!(count(&c, "aclrtRecordEvent"), 2, "{c:?}");
    assert_eq!(count(&c, "aclrtQueryEventStatus"), 1, "{c:?}");

    fail("aclrtWaitAndResetNotify", 107019);
    let err = b
        .wait(&s, RawStream::DEFAULT, Some(Duration::from_secs(1)))
        .unwrap_err();
    // The time measured (the fake fails at once), not the 1 s asked for.
    assert!(
        matches!(err, Error::Timeout { after, .. } if after < Duration::from_secs(1)),
        "{err:?}"
    );
    unfail("aclrtWaitAndResetNotify");

    b.destroy_signal(imported).unwrap();
    b.destroy_signal(s.clone()).unwrap();
    // Destroying the signal releases devipc's wait stream and event too.
    let c = calls();
    assert_eq!(count(&c, "aclrtDestroyStream"), 1, "{c:?}");
    assert_eq!(count(&c, "aclrtDestroyEvent"), 1, "{c:?}");
    assert!(matches!(
        b.destroy_signal(s),
        Err(Error::UnknownHandle { kind: "signal", .. })
    ));
}

#[test]
#[serial]
fn only_the_exporter_grants_a_signal() {
    let b = backend(fake_api());
    let s = b.create_signal(DeviceId(0)).unwrap();
    let t = b.export_signal(&s, ExportOptions::default()).unwrap();
    // A token naming a notify of another process.
    let foreign = SignalToken::new(SignalTokenParts {
        mechanism: Mechanism::AscendNotify,
        emulated: true,
        device: DeviceId(0),
        origin: TokenOrigin::current(ProcessId(1)),
        generation: t.generation(),
        payload: t.payload().to_vec(),
    })
    .unwrap();
    let err = b.grant_signal(&foreign, &[ProcessId(3)]).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument { .. }), "{err:?}");
    // Our own notify, once destroyed.
    b.destroy_signal(s).unwrap();
    assert!(b.grant_signal(&t, &[ProcessId(3)]).is_err());
}

#[test]
#[serial]
fn without_bare_tgid_the_process_id_is_getpid() {
    let mut api = fake_api();
    api.aclrtDeviceGetBareTgid = None;
    let b = backend(api);
    assert_eq!(b.process_id().unwrap(), ProcessId::current());
}

#[test]
#[serial]
fn drop_releases_everything_still_live() {
    let b = backend(fake_api());
    let (_alloc, token) = exported_vmm_token(&b, DeviceId(0));
    b.import(&token, DeviceId(0)).unwrap();
    b.create_signal(DeviceId(1)).unwrap();
    let (base, _) = fake::with(|s| s.block);
    b.export_external(
        DeviceId(0),
        DevicePtr(base as u64),
        8,
        ExportOptions::default(),
    )
    .unwrap();
    // A release failing during the drop is reported, not a panic.
    fail("aclrtDestroyNotify", 107017);
    calls();
    drop(b);
    let c = calls();
    assert_eq!(count(&c, "aclrtDestroyNotify"), 1, "{c:?}");
    assert_eq!(count(&c, "aclrtUnmapMem"), 2, "{c:?}");
    assert_eq!(count(&c, "aclrtFreePhysical"), 2, "{c:?}");
    assert_eq!(count(&c, "aclrtIpcMemClose"), 1, "{c:?}");
    assert_eq!(count(&c, "aclFinalize"), 1, "{c:?}");
}

#[test]
#[serial]
fn a_runtime_rejecting_the_notify_peer_flag_gets_peer_access_enabled_instead() {
    let b = backend(fake_api());
    let s = b.create_signal(DeviceId(1)).unwrap();
    let t = b.export_signal(&s, ExportOptions::default()).unwrap();
    fake::with(|s| s.notify_import_flag_limit = Some(1));
    calls();
    let imported = b.import_signal(&t, DeviceId(0)).unwrap();
    let c = calls();
    let wanted = [
        "aclrtNotifyImportByKey(0x2)",
        "aclrtDeviceEnablePeerAccess(0->1,0)",
        "aclrtNotifyImportByKey(0x0)",
    ];
    let seen: Vec<&String> = c.iter().filter(|c| wanted.contains(&c.as_str())).collect();
    assert_eq!(seen, wanted, "{c:?}");
    // Another failure of the flagged import is reported as it is.
    fail("aclrtNotifyImportByKey", 507899);
    let err = b.import_signal(&t, DeviceId(0)).unwrap_err();
    assert_eq!(
        err.vendor_name(),
        Some("ACL_ERROR_RT_DRV_INTERNAL_ERROR"),
        "{err}"
    );
    unfail("aclrtNotifyImportByKey");
    b.destroy_signal(imported).unwrap();
    b.destroy_signal(s).unwrap();
}

// ---- Bounds and error paths after the vendor import (devipc issue 12, items 1 and 10) ---

/// A VMM import whose mapped block the runtime reports smaller than the token's range is
/// refused after the map, and everything the import acquired is released.
#[test]
#[serial]
fn a_vmm_view_beyond_the_mapped_block_is_refused_and_the_import_released() {
    let b = backend(fake_api());
    let (alloc, token) = exported_vmm_token(&b, DeviceId(0));
    fake::with(|s| s.range_at_ptr = Some(8192));
    calls();
    let err = b.import(&token, DeviceId(0)).unwrap_err();
    fake::with(|s| s.range_at_ptr = None);
    assert!(matches!(err, Error::InvalidToken { .. }), "{err:?}");
    let c = calls();
    for undo in [
        "aclrtUnmapMem",
        "aclrtReleaseMemAddress",
        "aclrtFreePhysical",
    ] {
        assert_eq!(count(&c, undo), 1, "{undo}: {c:?}");
    }
    // Nothing is left for the drop to release but the allocation.
    b.free(alloc).unwrap();
    calls();
    drop(b);
    assert_eq!(count(&calls(), "aclrtUnmapMem"), 0);
}

/// A VMM token claiming more than the exporter's record is refused before any vendor
/// call (the exporter's record is the size, not the token).
#[test]
#[serial]
fn a_vmm_token_claiming_more_than_the_export_is_refused_before_the_runtime() {
    let b = backend(fake_api());
    let (alloc, token) = exported_vmm_token(&b, DeviceId(0));
    let mut parts = parts_of(&token);
    parts.object_size += 4096;
    parts.len = parts.object_size - parts.offset;
    let grown = MemToken::new(parts).unwrap();
    let mut parts = parts_of(&token);
    parts.generation += 1;
    let relabelled = MemToken::new(parts).unwrap();
    calls();
    for t in [&grown, &relabelled] {
        let err = b.import(t, DeviceId(0)).unwrap_err();
        assert!(matches!(err, Error::InvalidToken { .. }), "{err:?}");
    }
    assert_eq!(calls(), Vec::<String>::new());
    b.free(alloc).unwrap();
}

/// A key import refused after `aclrtIpcMemImportByKey` (the runtime reports a smaller
/// block than the range) closes that import and drops its lease hold: the exporter's
/// `close_external` then succeeds.
#[test]
#[serial]
fn a_key_import_refused_after_the_vendor_import_is_closed_and_its_lease_released() {
    let b = backend(fake_api());
    let (base, _) = fake::with(|s| s.block);
    let token = b
        .export_external(
            DeviceId(0),
            DevicePtr(base as u64),
            8192,
            ExportOptions::default(),
        )
        .unwrap();
    fake::with(|s| s.key_import_size = 4096);
    calls();
    let err = b.import(&token, DeviceId(0)).unwrap_err();
    assert!(matches!(err, Error::InvalidToken { .. }), "{err:?}");
    let c = calls();
    assert_eq!(count(&c, "aclrtIpcMemImportByKey"), 1, "{c:?}");
    assert_eq!(count(&c, "aclrtIpcMemClose"), 1, "{c:?}");
    // The hold is gone with the import: the exporter may close its key.
    b.close_external(DeviceId(0), DevicePtr(base as u64))
        .unwrap();
    assert_eq!(count(&calls(), "aclrtIpcMemClose"), 1);
}

/// A failed key import must not close an older import of the same key: the runtime's
/// close unmaps the key's *oldest* import in the process, so the failed one is closed
/// only once the older one is.
#[test]
#[serial]
fn a_failed_key_import_does_not_close_an_older_import_of_the_key() {
    let b = backend(fake_api());
    let token = exported_key_token(&b, DeviceId(0), 8192, 0, 8192);
    let older = b.import(&token, DeviceId(0)).unwrap();
    fake::with(|s| s.key_import_size = 4096);
    calls();
    let err = b.import(&token, DeviceId(0)).unwrap_err();
    assert!(matches!(err, Error::InvalidToken { .. }), "{err:?}");
    assert_eq!(
        count(&calls(), "aclrtIpcMemClose"),
        0,
        "the older import stays mapped"
    );
    b.close(older).unwrap();
    assert_eq!(count(&calls(), "aclrtIpcMemClose"), 2, "both, oldest first");
}

/// A key token stripped of its lease, of a key devipc exported, still holds the lease the
/// exporter recorded: the exporter's close is refused while that import lives.
#[test]
#[serial]
fn a_key_token_stripped_of_its_lease_still_holds_the_exporters_lease() {
    let b = backend(fake_api());
    let (base, _) = fake::with(|s| s.block);
    let token = b
        .export_external(
            DeviceId(0),
            DevicePtr(base as u64),
            4096,
            ExportOptions::default(),
        )
        .unwrap();
    let mut parts = parts_of(&token);
    parts.payload.truncate(65);
    let stripped = MemToken::new(parts).unwrap();
    let importer = backend(acl_api_from_module!(fake));
    let m = importer.import(&stripped, DeviceId(0)).unwrap();
    let err = b
        .close_external(DeviceId(0), DevicePtr(base as u64))
        .unwrap_err();
    assert!(err.to_string().contains("importers still have"), "{err}");
    importer.close(m).unwrap();
    b.close_external(DeviceId(0), DevicePtr(base as u64))
        .unwrap();
}

// ---- Dropping an exporter under a live importer (devipc issue 12, item 6) -----------------

/// A backend dropped while an importer holds its key export leaves the key open, and the
/// last backend then does not finalize ACL (which could tear the key down under the
/// importer).
#[test]
#[serial]
fn a_key_left_open_for_an_importer_keeps_acl_initialised() {
    let exporter = backend(fake_api());
    assert!(exporter.initialized_acl());
    let (base, _) = fake::with(|s| s.block);
    let token = exporter
        .export_external(
            DeviceId(0),
            DevicePtr(base as u64),
            4096,
            ExportOptions::default(),
        )
        .unwrap();
    let importer = backend(acl_api_from_module!(fake));
    let m = importer.import(&token, DeviceId(0)).unwrap();
    calls();
    drop(exporter);
    assert_eq!(
        count(&calls(), "aclrtIpcMemClose"),
        0,
        "the key stays open for the importer"
    );
    // The dropped export no longer imports.
    let err = importer.import(&token, DeviceId(0)).unwrap_err();
    assert!(err.to_string().contains("already freed"), "{err}");
    importer.close(m).unwrap();
    drop(importer);
    let c = calls();
    assert_eq!(
        count(&c, "aclrtIpcMemClose"),
        1,
        "the import's close: {c:?}"
    );
    assert_eq!(count(&c, "aclFinalize"), 0, "{c:?}");
}
