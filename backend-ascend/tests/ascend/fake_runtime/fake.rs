//! The scripted fake ACL runtime: every function of the list, each of which records its
//! call, returns the code a test forced (or success) and writes plausible outputs. The
//! state is per thread ([`with`]); `super::fake_api` turns the module into an `AclApi`.

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
    /// Run once by the next `aclrtMemImportFromShareableHandle`, before it answers (e.g.
    /// the exporter frees the allocation while the import is under way).
    pub during_import: Option<Box<dyn FnOnce()>>,
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
            during_import: None,
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
pub unsafe extern "C" fn aclrtMemcpyBatchAsync(
    _dsts: *mut *mut c_void,
    _destMaxs: *mut usize,
    _srcs: *mut *mut c_void,
    _sizes: *mut usize,
    numBatches: usize,
    _attrs: *mut aclrtMemcpyBatchAttr,
    _attrsIndexes: *mut usize,
    _numAttrs: usize,
    _failIndex: *mut usize,
    _stream: aclrtStream,
) -> aclError {
    forced!("aclrtMemcpyBatchAsync", numBatches.to_string());
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
pub unsafe extern "C" fn aclrtDeviceEnablePeerAccess(peerDeviceId: i32, flags: u32) -> aclError {
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
    // Outside the state's borrow: the hook calls back into the runtime.
    if let Some(hook) = with(|s| s.during_import.take()) {
        hook();
    }
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
pub unsafe extern "C" fn aclrtRecordNotify(_notify: aclrtNotify, _stream: aclrtStream) -> aclError {
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
pub unsafe extern "C" fn aclrtNotifyBatchReset(
    _notifies: *mut aclrtNotify,
    num: usize,
) -> aclError {
    forced!("aclrtNotifyBatchReset", num.to_string());
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
pub unsafe extern "C" fn aclrtCreateEventExWithFlag(event: *mut aclrtEvent, flag: u32) -> aclError {
    forced!("aclrtCreateEventExWithFlag", flag.to_string());
    // SAFETY: the caller (the backend) passes pointers valid for this access, as
    // the function's ACL contract requires.
    unsafe { *event = next_addr(1) as aclrtEvent };
    0
}
pub unsafe extern "C" fn aclrtCreateEventWithFlag(event: *mut aclrtEvent, flag: u32) -> aclError {
    forced!("aclrtCreateEventWithFlag", flag.to_string());
    // SAFETY: the caller (the backend) passes pointers valid for this access, as
    // the function's ACL contract requires.
    unsafe { *event = next_addr(1) as aclrtEvent };
    0
}
pub unsafe extern "C" fn aclrtDestroyEvent(_event: aclrtEvent) -> aclError {
    forced!("aclrtDestroyEvent");
    0
}
pub unsafe extern "C" fn aclrtRecordEvent(_event: aclrtEvent, _stream: aclrtStream) -> aclError {
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
pub unsafe extern "C" fn aclrtSynchronizeEventWithTimeout(
    _event: aclrtEvent,
    timeout: i32,
) -> aclError {
    forced!("aclrtSynchronizeEventWithTimeout", timeout.to_string());
    // The fake's stream tasks complete at once.
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

// Issue 16: device ids and identity. The fake runtime has no masks: user = logical =
// physical, and device d's UUID is 16 bytes of d.
pub unsafe extern "C" fn aclrtGetLogicDevIdByUserDevId(
    userDevid: i32,
    logicDevId: *mut i32,
) -> aclError {
    forced!("aclrtGetLogicDevIdByUserDevId", userDevid.to_string());
    // SAFETY: the caller (the backend) passes pointers valid for this access, as
    // the function's ACL contract requires.
    unsafe { *logicDevId = userDevid };
    0
}
pub unsafe extern "C" fn aclrtGetUserDevIdByLogicDevId(
    logicDevId: i32,
    userDevid: *mut i32,
) -> aclError {
    forced!("aclrtGetUserDevIdByLogicDevId", logicDevId.to_string());
    // SAFETY: as above.
    unsafe { *userDevid = logicDevId };
    0
}
pub unsafe extern "C" fn aclrtGetLogicDevIdByPhyDevId(
    phyDevId: i32,
    logicDevId: *mut i32,
) -> aclError {
    forced!("aclrtGetLogicDevIdByPhyDevId", phyDevId.to_string());
    // SAFETY: as above.
    unsafe { *logicDevId = phyDevId };
    0
}
pub unsafe extern "C" fn aclrtGetPhyDevIdByLogicDevId(
    logicDevId: i32,
    phyDevId: *mut i32,
) -> aclError {
    forced!("aclrtGetPhyDevIdByLogicDevId", logicDevId.to_string());
    // SAFETY: as above.
    unsafe { *phyDevId = logicDevId };
    0
}
pub unsafe extern "C" fn aclrtDeviceGetUuid(deviceId: i32, uuid: *mut aclrtUuid) -> aclError {
    forced!("aclrtDeviceGetUuid", deviceId.to_string());
    // SAFETY: as above.
    unsafe {
        *uuid = aclrtUuid {
            bytes: [deviceId as c_char; 16],
        }
    };
    0
}
