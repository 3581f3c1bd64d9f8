//! The ACL shell: ACL runtime calls through the raw [`AclApi`] table, one per command,
//! and [`Acl`], the typed client scenarios call.
//!
//! Vendor rules for Ascend run here, so they check whatever fills the table: the devipc
//! emulator, or the real `libascendcl.so` on an Ascend machine. The shell keeps no
//! objects of its own: handles, addresses and notifies travel as their numeric values
//! (meaningful only in the process that made them), keys as hex of their 65 bytes. Each
//! command is one vendor call (or a documented sequence, such as reserve + map + set
//! access), and a failure carries the code and `aclGetRecentErrMsg`.

use std::ffi::{CStr, c_char, c_void};
use std::sync::Arc;

use devipc_ascend_sys::AclApi;
use devipc_ascend_sys::codes::{ACL_ERROR_REPEAT_INITIALIZE, ACL_SUCCESS};
use devipc_ascend_sys::consts::{ACL_IPC_KEY_LEN, ACL_NOTIFY_DEFAULT};
use devipc_ascend_sys::types::{
    ACL_HBM_MEM_HUGE, ACL_MEM_ALLOCATION_TYPE_PINNED, ACL_MEM_HANDLE_TYPE_NONE,
    ACL_MEM_LOCATION_TYPE_DEVICE, ACL_MEM_MALLOC_HUGE_FIRST, ACL_MEMCPY_DEVICE_TO_DEVICE,
    ACL_MEMCPY_DEVICE_TO_HOST, ACL_MEMCPY_HOST_TO_DEVICE, ACL_RT_MEM_ACCESS_FLAGS_READWRITE,
    ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, aclError, aclrtDrvMemHandle, aclrtEvent,
    aclrtIpcEventHandle, aclrtMemAccessDesc, aclrtMemAccessFlags, aclrtMemAttr,
    aclrtMemGranularityOptions, aclrtMemHandleType, aclrtMemLocation, aclrtMemMallocPolicy,
    aclrtMemcpyKind, aclrtNotify, aclrtPhysicalMemProp,
};

use crate::shell::{Exec, Failure, Handler, Pids, Reply, arg, hex, unhex, word};

/// VMM granularity assumed when the runtime lacks `aclrtMemGetAllocationGranularity`.
const FALLBACK_GRANULARITY: usize = 2 << 20;

/// The shell's state: the table and how many `aclInit` calls of this shell are not yet
/// balanced by an `aclFinalize` (the runtime counts them, api-facts A.3).
pub struct AclShell {
    api: Arc<AclApi>,
    inits: u32,
}

impl std::fmt::Debug for AclShell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AclShell")
            .field("source", self.api.source())
            .finish()
    }
}

/// The optional function `$name` of the table, or a harness failure naming it.
macro_rules! opt {
    ($api:expr, $name:ident) => {
        $api.$name.ok_or_else(|| {
            Failure::harness(concat!(
                "this runtime lacks ",
                stringify!($name),
                " (too old for the rule)"
            ))
        })?
    };
}

impl AclShell {
    /// A shell on `api`; calls `aclInit` (accepting `ACL_ERROR_REPEAT_INITIALIZE`).
    pub fn new(api: Arc<AclApi>) -> Result<AclShell, Failure> {
        let mut shell = AclShell { api, inits: 0 };
        // SAFETY: a NULL config path is documented as "no configuration".
        let code = unsafe { (shell.api.aclInit)(std::ptr::null()) };
        if code != ACL_SUCCESS && code != ACL_ERROR_REPEAT_INITIALIZE {
            return Err(shell.failure("aclInit", code));
        }
        shell.inits = 1;
        Ok(shell)
    }

    /// A vendor failure with the runtime's last message.
    fn failure(&self, api: &str, code: aclError) -> Failure {
        // SAFETY: aclGetRecentErrMsg takes no arguments and returns NULL or a string the
        // runtime owns, valid until the next ACL call on this thread (copied at once).
        let msg = unsafe { (self.api.aclGetRecentErrMsg)() };
        let message = if msg.is_null() {
            String::new()
        } else {
            // SAFETY: non-NULL, NUL-terminated (the runtime's contract).
            unsafe { CStr::from_ptr(msg) }
                .to_string_lossy()
                .trim()
                .to_owned()
        };
        Failure::Vendor {
            api: api.to_owned(),
            code,
            message,
        }
    }

    fn check(&self, api: &str, code: aclError) -> Result<(), Failure> {
        if code == ACL_SUCCESS {
            Ok(())
        } else {
            Err(self.failure(api, code))
        }
    }

    fn prop(device: u32) -> aclrtPhysicalMemProp {
        Self::prop_with(device, ACL_HBM_MEM_HUGE)
    }

    fn prop_with(device: u32, mem_attr: aclrtMemAttr) -> aclrtPhysicalMemProp {
        aclrtPhysicalMemProp {
            handleType: ACL_MEM_HANDLE_TYPE_NONE,
            allocationType: ACL_MEM_ALLOCATION_TYPE_PINNED,
            memAttr: mem_attr,
            location: aclrtMemLocation {
                id: device,
                r#type: ACL_MEM_LOCATION_TYPE_DEVICE,
            },
            reserve: 0,
        }
    }

    fn granularity(&self, device: u32) -> Result<usize, Failure> {
        if self.api.aclrtMemGetAllocationGranularity.is_none() {
            return Ok(FALLBACK_GRANULARITY);
        }
        self.granularity_of(
            device,
            ACL_HBM_MEM_HUGE,
            ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM,
        )
    }

    /// `aclrtMemGetAllocationGranularity` for a device allocation of `mem_attr`.
    fn granularity_of(
        &self,
        device: u32,
        mem_attr: aclrtMemAttr,
        option: aclrtMemGranularityOptions,
    ) -> Result<usize, Failure> {
        let f = opt!(self.api, aclrtMemGetAllocationGranularity);
        let mut prop = Self::prop_with(device, mem_attr);
        let mut g = 0usize;
        // SAFETY: valid pointers for the call; `option` and `mem_attr` are plain integers
        // the runtime validates.
        let code = unsafe { f(&mut prop, option, &mut g) };
        self.check("aclrtMemGetAllocationGranularity", code)?;
        Ok(g)
    }
}

fn ptr(v: u64) -> *mut c_void {
    v as usize as *mut c_void
}

fn pid_args(pids: &Pids) -> (Vec<i32>, bool) {
    match pids {
        Pids::Null => (Vec::new(), true),
        Pids::List(l) => (l.clone(), false),
    }
}

/// A 65-byte key buffer from its hex form.
fn key_buf(text: &str) -> Result<Vec<u8>, Failure> {
    let mut key = unhex(text)?;
    if key.len() < ACL_IPC_KEY_LEN {
        key.resize(ACL_IPC_KEY_LEN, 0);
    }
    Ok(key)
}

impl Handler for AclShell {
    fn handle(&mut self, name: &str, a: &[&str]) -> Reply {
        let api = Arc::clone(&self.api);
        let none = || Ok(Vec::new());
        let one = |v: u64| Ok(vec![v.to_string()]);
        // SAFETY: for every call below, out-pointers point at live locals; pointer arguments
        // are values this shell or its peer got from the runtime, or deliberately invalid
        // values whose rejection is the rule under test (the runtime validates them);
        // buffers are live Vecs of the stated length.
        unsafe {
            match name {
                "set-device" => self
                    .check("aclrtSetDevice", (api.aclrtSetDevice)(arg(a, 0)?))
                    .and_then(|()| none()),
                "device-count" => {
                    let mut n = 0u32;
                    self.check("aclrtGetDeviceCount", (api.aclrtGetDeviceCount)(&mut n))?;
                    one(u64::from(n))
                }
                "pid" => {
                    let f = opt!(api, aclrtDeviceGetBareTgid);
                    let mut pid = 0i32;
                    self.check("aclrtDeviceGetBareTgid", f(&mut pid))?;
                    Ok(vec![pid.to_string()])
                }
                "granularity" => one(self.granularity(arg(a, 0)?)? as u64),
                "phys.alloc" => {
                    // Optional third argument: the reserved flags (0 unless a rule
                    // provokes the check).
                    let (dev, size): (u32, usize) = (arg(a, 0)?, arg(a, 1)?);
                    let flags: u64 = if a.len() > 2 { arg(a, 2)? } else { 0 };
                    let prop = Self::prop(dev);
                    let mut h: aclrtDrvMemHandle = std::ptr::null_mut();
                    self.check(
                        "aclrtMallocPhysical",
                        (api.aclrtMallocPhysical)(&mut h, size, &prop, flags),
                    )?;
                    one(h as usize as u64)
                }
                "phys.free" => self
                    .check(
                        "aclrtFreePhysical",
                        (api.aclrtFreePhysical)(ptr(arg(a, 0)?)),
                    )
                    .and_then(|()| none()),
                "va.map" => {
                    let (h, size, dev): (u64, usize, u32) = (arg(a, 0)?, arg(a, 1)?, arg(a, 2)?);
                    let mut va: *mut c_void = std::ptr::null_mut();
                    self.check(
                        "aclrtReserveMemAddress",
                        (api.aclrtReserveMemAddress)(&mut va, size, 0, std::ptr::null_mut(), 0),
                    )?;
                    let code = (api.aclrtMapMem)(va, size, 0, ptr(h), 0);
                    if code != ACL_SUCCESS {
                        let f = self.failure("aclrtMapMem", code);
                        (api.aclrtReleaseMemAddress)(va);
                        return Err(f);
                    }
                    if let Some(set_access) = api.aclrtMemSetAccess {
                        let mut desc = aclrtMemAccessDesc {
                            flags: ACL_RT_MEM_ACCESS_FLAGS_READWRITE,
                            location: aclrtMemLocation {
                                id: dev,
                                r#type: ACL_MEM_LOCATION_TYPE_DEVICE,
                            },
                            rsv: [0; 12],
                        };
                        let code = set_access(va, size, &mut desc, 1);
                        if code != ACL_SUCCESS {
                            let f = self.failure("aclrtMemSetAccess", code);
                            (api.aclrtUnmapMem)(va);
                            (api.aclrtReleaseMemAddress)(va);
                            return Err(f);
                        }
                    }
                    one(va as usize as u64)
                }
                "va.unmap" => {
                    let va = ptr(arg(a, 0)?);
                    self.check("aclrtUnmapMem", (api.aclrtUnmapMem)(va))?;
                    self.check("aclrtReleaseMemAddress", (api.aclrtReleaseMemAddress)(va))?;
                    none()
                }
                "vmm.export" => {
                    // Optional third argument: the handle type (NONE unless a rule
                    // provokes the check).
                    let f = opt!(api, aclrtMemExportToShareableHandle);
                    let (h, flags): (u64, u64) = (arg(a, 0)?, arg(a, 1)?);
                    let kind: aclrtMemHandleType = if a.len() > 2 {
                        arg(a, 2)?
                    } else {
                        ACL_MEM_HANDLE_TYPE_NONE
                    };
                    let mut sh = 0u64;
                    self.check(
                        "aclrtMemExportToShareableHandle",
                        f(ptr(h), kind, flags, &mut sh),
                    )?;
                    one(sh)
                }
                "vmm.set-pid" => {
                    let f = opt!(api, aclrtMemSetPidToShareableHandle);
                    let sh: u64 = arg(a, 0)?;
                    let (mut pids, null) =
                        pid_args(&Pids::parse(a.get(1).copied().unwrap_or("-"))?);
                    let (p, n) = if null {
                        (std::ptr::null_mut(), 1)
                    } else {
                        (pids.as_mut_ptr(), pids.len())
                    };
                    self.check("aclrtMemSetPidToShareableHandle", f(sh, p, n))
                        .and_then(|()| none())
                }
                "vmm.import" => {
                    let f = opt!(api, aclrtMemImportFromShareableHandle);
                    let (sh, dev): (u64, i32) = (arg(a, 0)?, arg(a, 1)?);
                    let mut h: aclrtDrvMemHandle = std::ptr::null_mut();
                    self.check("aclrtMemImportFromShareableHandle", f(sh, dev, &mut h))?;
                    one(h as usize as u64)
                }
                "malloc" => {
                    let size: usize = arg(a, 0)?;
                    let mut p: *mut c_void = std::ptr::null_mut();
                    self.check(
                        "aclrtMalloc",
                        (api.aclrtMalloc)(&mut p, size, ACL_MEM_MALLOC_HUGE_FIRST),
                    )?;
                    one(p as usize as u64)
                }
                "free" => self
                    .check("aclrtFree", (api.aclrtFree)(ptr(arg(a, 0)?)))
                    .and_then(|()| none()),
                "write" => {
                    let dst = ptr(arg(a, 0)?);
                    let bytes = unhex(a.get(1).copied().unwrap_or(""))?;
                    self.check(
                        "aclrtMemcpy",
                        (api.aclrtMemcpy)(
                            dst,
                            bytes.len(),
                            bytes.as_ptr().cast(),
                            bytes.len(),
                            ACL_MEMCPY_HOST_TO_DEVICE,
                        ),
                    )?;
                    none()
                }
                "read" => {
                    let (src, len): (u64, usize) = (arg(a, 0)?, arg(a, 1)?);
                    let mut buf = vec![0u8; len];
                    self.check(
                        "aclrtMemcpy",
                        (api.aclrtMemcpy)(
                            buf.as_mut_ptr().cast(),
                            len,
                            ptr(src),
                            len,
                            ACL_MEMCPY_DEVICE_TO_HOST,
                        ),
                    )?;
                    Ok(vec![hex(&buf)])
                }
                "copy.async-d2d" => {
                    // aclrtMemcpyAsync device to device on the default stream, then
                    // aclrtSynchronizeStream: the only copy the vendor allows of a key
                    // import used on another device (RT-DOC 11-07).
                    let f = opt!(api, aclrtMemcpyAsync);
                    let (dst, src, len): (u64, u64, usize) = (arg(a, 0)?, arg(a, 1)?, arg(a, 2)?);
                    self.check(
                        "aclrtMemcpyAsync",
                        f(
                            ptr(dst),
                            len,
                            ptr(src),
                            len,
                            ACL_MEMCPY_DEVICE_TO_DEVICE,
                            std::ptr::null_mut(),
                        ),
                    )?;
                    self.check(
                        "aclrtSynchronizeStream",
                        (api.aclrtSynchronizeStream)(std::ptr::null_mut()),
                    )?;
                    none()
                }
                "key.export" => {
                    let f = opt!(api, aclrtIpcMemGetExportKey);
                    let (p, size, len, flags): (u64, usize, usize, u64) =
                        (arg(a, 0)?, arg(a, 1)?, arg(a, 2)?, arg(a, 3)?);
                    let mut key = vec![0u8; len.max(ACL_IPC_KEY_LEN)];
                    self.check(
                        "aclrtIpcMemGetExportKey",
                        f(ptr(p), size, key.as_mut_ptr().cast::<c_char>(), len, flags),
                    )?;
                    key.truncate(ACL_IPC_KEY_LEN);
                    Ok(vec![hex(&key)])
                }
                "key.export-no-context" => {
                    // The same export from a fresh thread that never called aclrtSetDevice.
                    let f = opt!(api, aclrtIpcMemGetExportKey);
                    let (p, size): (u64, usize) = (arg(a, 0)?, arg(a, 1)?);
                    let api2 = Arc::clone(&api);
                    let (code, msg) = std::thread::spawn(move || {
                        let mut key = vec![0u8; ACL_IPC_KEY_LEN];
                        let code = f(
                            ptr(p),
                            size,
                            key.as_mut_ptr().cast::<c_char>(),
                            ACL_IPC_KEY_LEN,
                            0,
                        );
                        let m = (api2.aclGetRecentErrMsg)();
                        let msg = if m.is_null() {
                            String::new()
                        } else {
                            CStr::from_ptr(m).to_string_lossy().into_owned()
                        };
                        (code, (msg, key))
                    })
                    .join()
                    .map_err(|_| Failure::harness("the export thread panicked"))?;
                    if code == ACL_SUCCESS {
                        // Destroy the key again; the rule expects no key at all.
                        let key = msg.1;
                        if let Some(close) = api.aclrtIpcMemClose {
                            close(key.as_ptr().cast());
                        }
                        return Ok(vec![hex(&key)]);
                    }
                    Err(Failure::Vendor {
                        api: "aclrtIpcMemGetExportKey".into(),
                        code,
                        message: msg.0.trim().to_owned(),
                    })
                }
                "key.set-pid" => {
                    let f = opt!(api, aclrtIpcMemSetImportPid);
                    let key = key_buf(a.first().copied().unwrap_or(""))?;
                    let (mut pids, null) =
                        pid_args(&Pids::parse(a.get(1).copied().unwrap_or("-"))?);
                    let (p, n) = if null {
                        (std::ptr::null_mut(), 1)
                    } else {
                        (pids.as_mut_ptr(), pids.len())
                    };
                    self.check("aclrtIpcMemSetImportPid", f(key.as_ptr().cast(), p, n))
                        .and_then(|()| none())
                }
                "key.import" => {
                    let f = opt!(api, aclrtIpcMemImportByKey);
                    let key = key_buf(a.first().copied().unwrap_or(""))?;
                    let flags: u64 = arg(a, 1)?;
                    let mut p: *mut c_void = std::ptr::null_mut();
                    self.check(
                        "aclrtIpcMemImportByKey",
                        f(&mut p, key.as_ptr().cast(), flags),
                    )?;
                    one(p as usize as u64)
                }
                "key.close" => {
                    let f = opt!(api, aclrtIpcMemClose);
                    let key = key_buf(a.first().copied().unwrap_or(""))?;
                    self.check("aclrtIpcMemClose", f(key.as_ptr().cast()))
                        .and_then(|()| none())
                }
                "notify.create" => {
                    let f = opt!(api, aclrtCreateNotify);
                    let mut n: aclrtNotify = std::ptr::null_mut();
                    self.check(
                        "aclrtCreateNotify",
                        f(&mut n, u64::from(ACL_NOTIFY_DEFAULT)),
                    )?;
                    one(n as usize as u64)
                }
                "notify.export" => {
                    let f = opt!(api, aclrtNotifyGetExportKey);
                    let (n, len, flags): (u64, usize, u64) = (arg(a, 0)?, arg(a, 1)?, arg(a, 2)?);
                    let mut key = vec![0u8; len.max(ACL_IPC_KEY_LEN)];
                    self.check(
                        "aclrtNotifyGetExportKey",
                        f(ptr(n), key.as_mut_ptr().cast::<c_char>(), len, flags),
                    )?;
                    key.truncate(ACL_IPC_KEY_LEN);
                    Ok(vec![hex(&key)])
                }
                "notify.set-pid" => {
                    let f = opt!(api, aclrtNotifySetImportPid);
                    let n: u64 = arg(a, 0)?;
                    let (mut pids, null) =
                        pid_args(&Pids::parse(a.get(1).copied().unwrap_or("-"))?);
                    let (p, num) = if null {
                        (std::ptr::null_mut(), 1)
                    } else {
                        (pids.as_mut_ptr(), pids.len())
                    };
                    self.check("aclrtNotifySetImportPid", f(ptr(n), p, num))
                        .and_then(|()| none())
                }
                "notify.import" => {
                    let f = opt!(api, aclrtNotifyImportByKey);
                    let key = key_buf(a.first().copied().unwrap_or(""))?;
                    let flags: u64 = arg(a, 1)?;
                    let mut n: aclrtNotify = std::ptr::null_mut();
                    self.check(
                        "aclrtNotifyImportByKey",
                        f(&mut n, key.as_ptr().cast(), flags),
                    )?;
                    one(n as usize as u64)
                }
                "notify.record" => {
                    // A stream task: queue it, then synchronise the default stream so the
                    // record has happened when the command returns.
                    let f = opt!(api, aclrtRecordNotify);
                    self.check(
                        "aclrtRecordNotify",
                        f(ptr(arg(a, 0)?), std::ptr::null_mut()),
                    )?;
                    self.check(
                        "aclrtSynchronizeStream",
                        (api.aclrtSynchronizeStream)(std::ptr::null_mut()),
                    )
                    .and_then(|()| none())
                }
                "notify.wait" => {
                    let f = opt!(api, aclrtWaitAndResetNotify);
                    let (n, timeout): (u64, u32) = (arg(a, 0)?, arg(a, 1)?);
                    // A stream task too: the synchronisation blocks until the wait is over
                    // (and reports its timeout on runtimes where the call itself returns
                    // at once).
                    self.check(
                        "aclrtWaitAndResetNotify",
                        f(ptr(n), std::ptr::null_mut(), timeout),
                    )?;
                    self.check(
                        "aclrtSynchronizeStream",
                        (api.aclrtSynchronizeStream)(std::ptr::null_mut()),
                    )
                    .and_then(|()| none())
                }
                "notify.wait-on" => {
                    // Only the call: aclrtWaitAndResetNotify on a stream, which enqueues the
                    // wait ("blocks the stream; asynchronous interface"); no synchronisation.
                    let f = opt!(api, aclrtWaitAndResetNotify);
                    let (n, timeout, s): (u64, u32, u64) = (arg(a, 0)?, arg(a, 1)?, arg(a, 2)?);
                    self.check("aclrtWaitAndResetNotify", f(ptr(n), ptr(s), timeout))
                        .and_then(|()| none())
                }
                "stream.create" => {
                    let mut s = std::ptr::null_mut();
                    self.check("aclrtCreateStream", (api.aclrtCreateStream)(&mut s))?;
                    one(s as usize as u64)
                }
                "stream.sync" => self
                    .check(
                        "aclrtSynchronizeStream",
                        (api.aclrtSynchronizeStream)(ptr(arg(a, 0)?)),
                    )
                    .and_then(|()| none()),
                "stream.destroy" => self
                    .check(
                        "aclrtDestroyStream",
                        (api.aclrtDestroyStream)(ptr(arg(a, 0)?)),
                    )
                    .and_then(|()| none()),
                "notify.destroy" => {
                    let f = opt!(api, aclrtDestroyNotify);
                    self.check("aclrtDestroyNotify", f(ptr(arg(a, 0)?)))
                        .and_then(|()| none())
                }
                "event.create" => {
                    let f = opt!(api, aclrtCreateEventExWithFlag);
                    let flag: u32 = arg(a, 0)?;
                    let mut e: aclrtEvent = std::ptr::null_mut();
                    self.check("aclrtCreateEventExWithFlag", f(&mut e, flag))?;
                    one(e as usize as u64)
                }
                "event.handle" => {
                    let f = opt!(api, aclrtIpcGetEventHandle);
                    let mut h = aclrtIpcEventHandle::default();
                    self.check("aclrtIpcGetEventHandle", f(ptr(arg(a, 0)?), &mut h))?;
                    let bytes: Vec<u8> = h.reserved.iter().map(|c| *c as u8).collect();
                    Ok(vec![hex(&bytes)])
                }
                "event.open" => {
                    let f = opt!(api, aclrtIpcOpenEventHandle);
                    let bytes = unhex(a.first().copied().unwrap_or(""))?;
                    let mut h = aclrtIpcEventHandle::default();
                    for (slot, b) in h.reserved.iter_mut().zip(bytes) {
                        *slot = b as c_char;
                    }
                    let mut e: aclrtEvent = std::ptr::null_mut();
                    self.check("aclrtIpcOpenEventHandle", f(h, &mut e))?;
                    one(e as usize as u64)
                }
                "event.record" => {
                    // A stream task: record on the default stream, then synchronise it.
                    let f = opt!(api, aclrtRecordEvent);
                    self.check("aclrtRecordEvent", f(ptr(arg(a, 0)?), std::ptr::null_mut()))?;
                    self.check(
                        "aclrtSynchronizeStream",
                        (api.aclrtSynchronizeStream)(std::ptr::null_mut()),
                    )
                    .and_then(|()| none())
                }
                "event.wait" => {
                    // The default stream waits for the event, then is synchronised.
                    let f = opt!(api, aclrtStreamWaitEvent);
                    self.check(
                        "aclrtStreamWaitEvent",
                        f(std::ptr::null_mut(), ptr(arg(a, 0)?)),
                    )?;
                    self.check(
                        "aclrtSynchronizeStream",
                        (api.aclrtSynchronizeStream)(std::ptr::null_mut()),
                    )
                    .and_then(|()| none())
                }
                "event.destroy" => {
                    let f = opt!(api, aclrtDestroyEvent);
                    self.check("aclrtDestroyEvent", f(ptr(arg(a, 0)?)))
                        .and_then(|()| none())
                }
                "peer.can" => {
                    let (d, p): (i32, i32) = (arg(a, 0)?, arg(a, 1)?);
                    let mut v = 0i32;
                    self.check(
                        "aclrtDeviceCanAccessPeer",
                        (api.aclrtDeviceCanAccessPeer)(&mut v, d, p),
                    )?;
                    Ok(vec![v.to_string()])
                }
                "peer.enable" => {
                    let (p, flags): (i32, u32) = (arg(a, 0)?, arg(a, 1)?);
                    self.check(
                        "aclrtDeviceEnablePeerAccess",
                        (api.aclrtDeviceEnablePeerAccess)(p, flags),
                    )
                    .and_then(|()| none())
                }
                "pid-null" => {
                    let f = opt!(api, aclrtDeviceGetBareTgid);
                    self.check("aclrtDeviceGetBareTgid", f(std::ptr::null_mut()))
                        .and_then(|()| none())
                }
                "init" => {
                    // aclInit is counted (api-facts A.3): a repeated call returns
                    // ACL_ERROR_REPEAT_INITIALIZE and still needs its aclFinalize.
                    let code = (api.aclInit)(std::ptr::null());
                    if code == ACL_SUCCESS || code == ACL_ERROR_REPEAT_INITIALIZE {
                        self.inits += 1;
                    }
                    self.check("aclInit", code).and_then(|()| none())
                }
                "finalize" => {
                    let code = (api.aclFinalize)();
                    if code == ACL_SUCCESS {
                        self.inits = self.inits.saturating_sub(1);
                    }
                    self.check("aclFinalize", code).and_then(|()| none())
                }
                "granularity.of" => {
                    let (dev, attr, option): (u32, aclrtMemAttr, aclrtMemGranularityOptions) =
                        (arg(a, 0)?, arg(a, 1)?, arg(a, 2)?);
                    one(self.granularity_of(dev, attr, option)? as u64)
                }
                "malloc.policy" => {
                    let (size, policy): (usize, aclrtMemMallocPolicy) = (arg(a, 0)?, arg(a, 1)?);
                    let mut p: *mut c_void = std::ptr::null_mut();
                    self.check("aclrtMalloc", (api.aclrtMalloc)(&mut p, size, policy))?;
                    one(p as usize as u64)
                }
                "address-range" => {
                    let f = opt!(api, aclrtMemGetAddressRange);
                    let mut base: *mut c_void = std::ptr::null_mut();
                    let mut size = 0usize;
                    self.check(
                        "aclrtMemGetAddressRange",
                        f(ptr(arg(a, 0)?), &mut base, &mut size),
                    )?;
                    Ok(vec![(base as usize).to_string(), size.to_string()])
                }
                "va.reserve" => {
                    let (size, alignment, flags): (usize, usize, u64) =
                        (arg(a, 0)?, arg(a, 1)?, arg(a, 2)?);
                    let mut va: *mut c_void = std::ptr::null_mut();
                    self.check(
                        "aclrtReserveMemAddress",
                        (api.aclrtReserveMemAddress)(
                            &mut va,
                            size,
                            alignment,
                            std::ptr::null_mut(),
                            flags,
                        ),
                    )?;
                    one(va as usize as u64)
                }
                "va.release" => self
                    .check(
                        "aclrtReleaseMemAddress",
                        (api.aclrtReleaseMemAddress)(ptr(arg(a, 0)?)),
                    )
                    .and_then(|()| none()),
                "mem.map" => {
                    let (va, size, offset, h, flags): (u64, usize, usize, u64, u64) =
                        (arg(a, 0)?, arg(a, 1)?, arg(a, 2)?, arg(a, 3)?, arg(a, 4)?);
                    self.check(
                        "aclrtMapMem",
                        (api.aclrtMapMem)(ptr(va), size, offset, ptr(h), flags),
                    )
                    .and_then(|()| none())
                }
                "mem.unmap" => self
                    .check("aclrtUnmapMem", (api.aclrtUnmapMem)(ptr(arg(a, 0)?)))
                    .and_then(|()| none()),
                "mem.set-access" => {
                    let f = opt!(api, aclrtMemSetAccess);
                    let (va, size, dev, flags): (u64, usize, u32, aclrtMemAccessFlags) =
                        (arg(a, 0)?, arg(a, 1)?, arg(a, 2)?, arg(a, 3)?);
                    let mut desc = aclrtMemAccessDesc {
                        flags,
                        location: aclrtMemLocation {
                            id: dev,
                            r#type: ACL_MEM_LOCATION_TYPE_DEVICE,
                        },
                        rsv: [0; 12],
                    };
                    self.check("aclrtMemSetAccess", f(ptr(va), size, &mut desc, 1))
                        .and_then(|()| none())
                }
                "sync-device-timeout" => {
                    let f = opt!(api, aclrtSynchronizeDeviceWithTimeout);
                    self.check("aclrtSynchronizeDeviceWithTimeout", f(arg(a, 0)?))
                        .and_then(|()| none())
                }
                "mem-info" => {
                    let f = opt!(api, aclrtGetMemInfo);
                    let (mut free, mut total) = (0usize, 0usize);
                    self.check("aclrtGetMemInfo", f(arg(a, 0)?, &mut free, &mut total))?;
                    Ok(vec![free.to_string(), total.to_string()])
                }
                "write.bounded" => {
                    // aclrtMemcpy host to device of the given bytes with an explicit
                    // destMax (the destination's stated capacity).
                    let (dst, dest_max): (u64, usize) = (arg(a, 0)?, arg(a, 1)?);
                    let bytes = unhex(a.get(2).copied().unwrap_or(""))?;
                    self.check(
                        "aclrtMemcpy",
                        (api.aclrtMemcpy)(
                            ptr(dst),
                            dest_max,
                            bytes.as_ptr().cast(),
                            bytes.len(),
                            ACL_MEMCPY_HOST_TO_DEVICE,
                        ),
                    )
                    .and_then(|()| none())
                }
                "read.kind" => {
                    // aclrtMemcpy from device memory into a host buffer with the given
                    // kind (ACL_MEMCPY_DEVICE_TO_HOST unless a rule provokes the check).
                    let (src, len, kind): (u64, usize, aclrtMemcpyKind) =
                        (arg(a, 0)?, arg(a, 1)?, arg(a, 2)?);
                    let mut buf = vec![0u8; len];
                    self.check(
                        "aclrtMemcpy",
                        (api.aclrtMemcpy)(buf.as_mut_ptr().cast(), len, ptr(src), len, kind),
                    )?;
                    Ok(vec![hex(&buf)])
                }
                other => Err(Failure::harness(format!(
                    "unknown ACL shell command `{other}`"
                ))),
            }
        }
    }
}

impl Drop for AclShell {
    fn drop(&mut self) {
        for _ in 0..self.inits {
            // SAFETY: balances an aclInit of this shell; no arguments.
            unsafe { (self.api.aclFinalize)() };
        }
    }
}

/// A VMM allocation made through the shell: physical handle, mapped address, size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Vmm {
    /// The `aclrtDrvMemHandle`, as a number.
    pub phys: u64,
    /// Where it is mapped.
    pub va: u64,
    /// Its size (a multiple of the granularity).
    pub size: usize,
}

/// The typed client of an ACL shell, local or remote.
#[derive(Debug)]
pub struct Acl<E>(pub E);

impl<E: Exec> Acl<E> {
    fn run(&mut self, line: String) -> Reply {
        self.0.exec(&line)
    }

    /// `aclrtSetDevice`.
    pub fn set_device(&mut self, dev: u32) -> Result<(), Failure> {
        self.run(format!("set-device {dev}")).map(drop)
    }

    /// `aclrtGetDeviceCount`.
    pub fn device_count(&mut self) -> Result<u32, Failure> {
        word(&self.run("device-count".into())?, 0)
    }

    /// `aclrtDeviceGetBareTgid`.
    pub fn pid(&mut self) -> Result<i32, Failure> {
        word(&self.run("pid".into())?, 0)
    }

    /// The VMM allocation granularity on `dev`.
    pub fn granularity(&mut self, dev: u32) -> Result<usize, Failure> {
        word(&self.run(format!("granularity {dev}"))?, 0)
    }

    /// `aclrtMallocPhysical` of `size` bytes on `dev`.
    pub fn phys_alloc(&mut self, dev: u32, size: usize) -> Result<u64, Failure> {
        word(&self.run(format!("phys.alloc {dev} {size}"))?, 0)
    }

    /// `aclrtFreePhysical`.
    pub fn phys_free(&mut self, phys: u64) -> Result<(), Failure> {
        self.run(format!("phys.free {phys}")).map(drop)
    }

    /// Reserve, map and grant `dev` read-write access: the address.
    pub fn map(&mut self, phys: u64, size: usize, dev: u32) -> Result<u64, Failure> {
        word(&self.run(format!("va.map {phys} {size} {dev}"))?, 0)
    }

    /// Unmap and release an address from [`Acl::map`].
    pub fn unmap(&mut self, va: u64) -> Result<(), Failure> {
        self.run(format!("va.unmap {va}")).map(drop)
    }

    /// `aclrtMapMem` of `phys` (`size` bytes) at `va` inside a reservation, then read-write
    /// access for `dev` where the runtime has `aclrtMemSetAccess`.
    pub fn map_rw_at(&mut self, va: u64, phys: u64, size: usize, dev: u32) -> Result<(), Failure> {
        self.map_at(va, size, 0, phys, 0)?;
        match self.set_access(va, size, dev, ACL_RT_MEM_ACCESS_FLAGS_READWRITE) {
            // A runtime without aclrtMemSetAccess maps read-write.
            Ok(()) | Err(Failure::Harness(_)) => Ok(()),
            Err(e) => {
                let _ = self.unmap_only(va);
                Err(e)
            }
        }
    }

    /// One granule of physical memory on `dev`, mapped.
    pub fn vmm_alloc(&mut self, dev: u32) -> Result<Vmm, Failure> {
        let size = self.granularity(dev)?;
        let phys = self.phys_alloc(dev, size)?;
        match self.map(phys, size, dev) {
            Ok(va) => Ok(Vmm { phys, va, size }),
            Err(e) => {
                let _ = self.phys_free(phys);
                Err(e)
            }
        }
    }

    /// Unmaps and frees a [`Vmm`].
    pub fn vmm_free(&mut self, vmm: Vmm) -> Result<(), Failure> {
        self.unmap(vmm.va)?;
        self.phys_free(vmm.phys)
    }

    /// `aclrtMemExportToShareableHandle` with `flags`.
    pub fn vmm_export(&mut self, phys: u64, flags: u64) -> Result<u64, Failure> {
        word(&self.run(format!("vmm.export {phys} {flags}"))?, 0)
    }

    /// `aclrtMemSetPidToShareableHandle`.
    pub fn vmm_set_pid(&mut self, shareable: u64, pids: &Pids) -> Result<(), Failure> {
        self.run(format!("vmm.set-pid {shareable} {}", pids.wire()))
            .map(drop)
    }

    /// `aclrtMemImportFromShareableHandle` on `dev`: the physical handle.
    pub fn vmm_import(&mut self, shareable: u64, dev: i32) -> Result<u64, Failure> {
        word(&self.run(format!("vmm.import {shareable} {dev}"))?, 0)
    }

    /// `aclrtMalloc`.
    pub fn malloc(&mut self, size: usize) -> Result<u64, Failure> {
        word(&self.run(format!("malloc {size}"))?, 0)
    }

    /// `aclrtFree`.
    pub fn free(&mut self, ptr: u64) -> Result<(), Failure> {
        self.run(format!("free {ptr}")).map(drop)
    }

    /// `aclrtMemcpy` host to device.
    pub fn write(&mut self, dst: u64, bytes: &[u8]) -> Result<(), Failure> {
        self.run(format!("write {dst} {}", hex(bytes))).map(drop)
    }

    /// `aclrtMemcpy` device to host.
    pub fn read(&mut self, src: u64, len: usize) -> Result<Vec<u8>, Failure> {
        unhex(&word::<String>(&self.run(format!("read {src} {len}"))?, 0)?)
    }

    /// `aclrtMemcpyAsync` device to device on the default stream, synchronised.
    pub fn copy_async_d2d(&mut self, dst: u64, src: u64, len: usize) -> Result<(), Failure> {
        self.run(format!("copy.async-d2d {dst} {src} {len}"))
            .map(drop)
    }

    /// `aclrtIpcMemGetExportKey` with a key buffer of `len` bytes.
    pub fn key_export(
        &mut self,
        ptr: u64,
        size: usize,
        len: usize,
        flags: u64,
    ) -> Result<String, Failure> {
        word(
            &self.run(format!("key.export {ptr} {size} {len} {flags}"))?,
            0,
        )
    }

    /// `aclrtIpcMemGetExportKey` from a thread without a device context.
    pub fn key_export_no_context(&mut self, ptr: u64, size: usize) -> Result<String, Failure> {
        word(&self.run(format!("key.export-no-context {ptr} {size}"))?, 0)
    }

    /// `aclrtIpcMemSetImportPid`.
    pub fn key_set_pid(&mut self, key: &str, pids: &Pids) -> Result<(), Failure> {
        self.run(format!("key.set-pid {key} {}", pids.wire()))
            .map(drop)
    }

    /// `aclrtIpcMemImportByKey`: the address.
    pub fn key_import(&mut self, key: &str, flags: u64) -> Result<u64, Failure> {
        word(&self.run(format!("key.import {key} {flags}"))?, 0)
    }

    /// `aclrtIpcMemClose`.
    pub fn key_close(&mut self, key: &str) -> Result<(), Failure> {
        self.run(format!("key.close {key}")).map(drop)
    }

    /// `aclrtCreateNotify` (default flag).
    pub fn notify_create(&mut self) -> Result<u64, Failure> {
        word(&self.run("notify.create".into())?, 0)
    }

    /// `aclrtNotifyGetExportKey` with a key buffer of `len` bytes.
    pub fn notify_export(
        &mut self,
        notify: u64,
        len: usize,
        flags: u64,
    ) -> Result<String, Failure> {
        word(
            &self.run(format!("notify.export {notify} {len} {flags}"))?,
            0,
        )
    }

    /// `aclrtNotifySetImportPid`.
    pub fn notify_set_pid(&mut self, notify: u64, pids: &Pids) -> Result<(), Failure> {
        self.run(format!("notify.set-pid {notify} {}", pids.wire()))
            .map(drop)
    }

    /// `aclrtNotifyImportByKey`: the notify.
    pub fn notify_import(&mut self, key: &str, flags: u64) -> Result<u64, Failure> {
        word(&self.run(format!("notify.import {key} {flags}"))?, 0)
    }

    /// `aclrtRecordNotify` on the default stream, then `aclrtSynchronizeStream`.
    pub fn notify_record(&mut self, notify: u64) -> Result<(), Failure> {
        self.run(format!("notify.record {notify}")).map(drop)
    }

    /// `aclrtWaitAndResetNotify` on the default stream (`timeout` 0: forever; the unit is
    /// seconds per RT-DOC, milliseconds per the header), then `aclrtSynchronizeStream`.
    pub fn notify_wait(&mut self, notify: u64, timeout: u32) -> Result<(), Failure> {
        self.run(format!("notify.wait {notify} {timeout}"))
            .map(drop)
    }

    /// `aclrtWaitAndResetNotify` on `stream`, the call only (the wait is a stream task:
    /// synchronise the stream to wait for it).
    pub fn notify_wait_on(
        &mut self,
        notify: u64,
        timeout: u32,
        stream: u64,
    ) -> Result<(), Failure> {
        self.run(format!("notify.wait-on {notify} {timeout} {stream}"))
            .map(drop)
    }

    /// `aclrtCreateStream`: the stream.
    pub fn stream_create(&mut self) -> Result<u64, Failure> {
        word(&self.run("stream.create".into())?, 0)
    }

    /// `aclrtSynchronizeStream`.
    pub fn stream_sync(&mut self, stream: u64) -> Result<(), Failure> {
        self.run(format!("stream.sync {stream}")).map(drop)
    }

    /// `aclrtDestroyStream`.
    pub fn stream_destroy(&mut self, stream: u64) -> Result<(), Failure> {
        self.run(format!("stream.destroy {stream}")).map(drop)
    }

    /// `aclrtDestroyNotify`.
    pub fn notify_destroy(&mut self, notify: u64) -> Result<(), Failure> {
        self.run(format!("notify.destroy {notify}")).map(drop)
    }

    /// `aclrtCreateEventExWithFlag` with `flag`: the event.
    pub fn event_create(&mut self, flag: u32) -> Result<u64, Failure> {
        word(&self.run(format!("event.create {flag}"))?, 0)
    }

    /// `aclrtIpcGetEventHandle`: the 64 bytes as hex.
    pub fn event_handle(&mut self, event: u64) -> Result<String, Failure> {
        word(&self.run(format!("event.handle {event}"))?, 0)
    }

    /// `aclrtIpcOpenEventHandle` of a handle from [`Acl::event_handle`]: the event.
    pub fn event_open(&mut self, handle: &str) -> Result<u64, Failure> {
        word(&self.run(format!("event.open {handle}"))?, 0)
    }

    /// `aclrtRecordEvent` on the default stream, then `aclrtSynchronizeStream`.
    pub fn event_record(&mut self, event: u64) -> Result<(), Failure> {
        self.run(format!("event.record {event}")).map(drop)
    }

    /// `aclrtStreamWaitEvent` of the default stream, then `aclrtSynchronizeStream`.
    pub fn event_wait(&mut self, event: u64) -> Result<(), Failure> {
        self.run(format!("event.wait {event}")).map(drop)
    }

    /// `aclrtDestroyEvent`.
    pub fn event_destroy(&mut self, event: u64) -> Result<(), Failure> {
        self.run(format!("event.destroy {event}")).map(drop)
    }

    /// `aclrtDeviceCanAccessPeer`.
    pub fn can_access_peer(&mut self, dev: i32, peer: i32) -> Result<bool, Failure> {
        Ok(word::<i32>(&self.run(format!("peer.can {dev} {peer}"))?, 0)? != 0)
    }

    /// `aclrtDeviceEnablePeerAccess` from the current device.
    pub fn enable_peer(&mut self, peer: i32) -> Result<(), Failure> {
        self.run(format!("peer.enable {peer} 0")).map(drop)
    }

    /// `aclrtDeviceEnablePeerAccess` with explicit (reserved) `flags`.
    pub fn enable_peer_flags(&mut self, peer: i32, flags: u32) -> Result<(), Failure> {
        self.run(format!("peer.enable {peer} {flags}")).map(drop)
    }

    /// `aclrtDeviceGetBareTgid(NULL)`.
    pub fn pid_null(&mut self) -> Result<(), Failure> {
        self.run("pid-null".into()).map(drop)
    }

    /// `aclInit(NULL)` once more (the shell balances it with `aclFinalize` on exit).
    pub fn init(&mut self) -> Result<(), Failure> {
        self.run("init".into()).map(drop)
    }

    /// `aclFinalize`.
    pub fn finalize(&mut self) -> Result<(), Failure> {
        self.run("finalize".into()).map(drop)
    }

    /// `aclrtMemGetAllocationGranularity` for a device allocation with `mem_attr`.
    pub fn granularity_of(
        &mut self,
        dev: u32,
        mem_attr: aclrtMemAttr,
        option: aclrtMemGranularityOptions,
    ) -> Result<usize, Failure> {
        word(
            &self.run(format!("granularity.of {dev} {mem_attr} {option}"))?,
            0,
        )
    }

    /// `aclrtMallocPhysical` with explicit (reserved) `flags`.
    pub fn phys_alloc_flags(&mut self, dev: u32, size: usize, flags: u64) -> Result<u64, Failure> {
        word(&self.run(format!("phys.alloc {dev} {size} {flags}"))?, 0)
    }

    /// `aclrtMemExportToShareableHandle` with an explicit handle type.
    pub fn vmm_export_type(
        &mut self,
        phys: u64,
        flags: u64,
        handle_type: aclrtMemHandleType,
    ) -> Result<u64, Failure> {
        word(
            &self.run(format!("vmm.export {phys} {flags} {handle_type}"))?,
            0,
        )
    }

    /// `aclrtMalloc` with an explicit policy.
    pub fn malloc_policy(
        &mut self,
        size: usize,
        policy: aclrtMemMallocPolicy,
    ) -> Result<u64, Failure> {
        word(&self.run(format!("malloc.policy {size} {policy}"))?, 0)
    }

    /// `aclrtMemGetAddressRange`: (base, size).
    pub fn address_range(&mut self, ptr: u64) -> Result<(u64, usize), Failure> {
        let r = self.run(format!("address-range {ptr}"))?;
        Ok((word(&r, 0)?, word(&r, 1)?))
    }

    /// `aclrtReserveMemAddress(size, alignment, NULL, flags)`.
    pub fn reserve(&mut self, size: usize, alignment: usize, flags: u64) -> Result<u64, Failure> {
        word(
            &self.run(format!("va.reserve {size} {alignment} {flags}"))?,
            0,
        )
    }

    /// `aclrtReleaseMemAddress`.
    pub fn release(&mut self, va: u64) -> Result<(), Failure> {
        self.run(format!("va.release {va}")).map(drop)
    }

    /// `aclrtMapMem(va, size, offset, phys, flags)`, nothing else.
    pub fn map_at(
        &mut self,
        va: u64,
        size: usize,
        offset: usize,
        phys: u64,
        flags: u64,
    ) -> Result<(), Failure> {
        self.run(format!("mem.map {va} {size} {offset} {phys} {flags}"))
            .map(drop)
    }

    /// `aclrtUnmapMem`, nothing else.
    pub fn unmap_only(&mut self, va: u64) -> Result<(), Failure> {
        self.run(format!("mem.unmap {va}")).map(drop)
    }

    /// `aclrtMemSetAccess` of `size` bytes at `va` with one descriptor for `dev`.
    pub fn set_access(
        &mut self,
        va: u64,
        size: usize,
        dev: u32,
        flags: aclrtMemAccessFlags,
    ) -> Result<(), Failure> {
        self.run(format!("mem.set-access {va} {size} {dev} {flags}"))
            .map(drop)
    }

    /// `aclrtSynchronizeDeviceWithTimeout(timeout)` (milliseconds; -1 waits forever).
    pub fn sync_device_timeout(&mut self, timeout: i32) -> Result<(), Failure> {
        self.run(format!("sync-device-timeout {timeout}")).map(drop)
    }

    /// `aclrtGetMemInfo(attr)`: (free, total) bytes.
    pub fn mem_info(&mut self, attr: aclrtMemAttr) -> Result<(usize, usize), Failure> {
        let r = self.run(format!("mem-info {attr}"))?;
        Ok((word(&r, 0)?, word(&r, 1)?))
    }

    /// `aclrtMemcpy` host to device of `bytes` with an explicit `destMax`.
    pub fn write_bounded(
        &mut self,
        dst: u64,
        dest_max: usize,
        bytes: &[u8],
    ) -> Result<(), Failure> {
        self.run(format!("write.bounded {dst} {dest_max} {}", hex(bytes)))
            .map(drop)
    }

    /// `aclrtMemcpy` of `len` bytes from `src` into a host buffer, with `kind`.
    pub fn read_kind(
        &mut self,
        src: u64,
        len: usize,
        kind: aclrtMemcpyKind,
    ) -> Result<Vec<u8>, Failure> {
        unhex(&word::<String>(
            &self.run(format!("read.kind {src} {len} {kind}"))?,
            0,
        )?)
    }
}

impl Acl<crate::shell::Remote> {
    /// [`Acl::notify_wait_on`] in the peer, which must answer within `limit` (the call only
    /// enqueues); a peer still in the call after `limit` is an error.
    pub fn notify_wait_on_within(
        &mut self,
        notify: u64,
        timeout: u32,
        stream: u64,
        limit: std::time::Duration,
    ) -> Result<(), Failure> {
        self.0
            .send(&format!("notify.wait-on {notify} {timeout} {stream}"))?;
        self.0.reply_within(limit).map(drop)
    }

    /// Starts `notify.wait` in the peer without waiting for it to return.
    pub fn notify_wait_start(&mut self, notify: u64, timeout: u32) -> Result<(), Failure> {
        self.0.send(&format!("notify.wait {notify} {timeout}"))
    }

    /// Collects the result of [`Acl::notify_wait_start`].
    pub fn notify_wait_end(&mut self) -> Result<(), Failure> {
        self.0.reply().map(drop)
    }
}
