//! The HIP shell: HIP runtime calls through the raw [`HipApi`] table, one per command,
//! and [`Hip`], the typed client scenarios call (its memory calls are [`VendorClient`]'s,
//! shared with the ACL client).
//!
//! Vendor rules for HIP run here, so they check whatever fills the table: the devipc
//! emulator, or the real `libamdhip64` on an AMD machine. Pointers and events travel as
//! numbers (meaningful only in the process that made them), the 64-byte IPC handles as
//! hex. A failure carries the code and `hipGetErrorString` read right after the call.
//! The VMM commands (`vmm.*`, `ptr.attr`) and the descriptor passing they need (`fd.*`)
//! are in `hip/vmm.rs`.

use std::ffi::{CStr, c_char, c_int, c_uint, c_void};
use std::sync::Arc;

use devipc_hip_sys::{
    HIP_IPC_HANDLE_SIZE, HipApi, hipError_t, hipEvent_t, hipIpcEventHandle_t, hipIpcMemHandle_t,
    hipMemcpyDeviceToHost, hipMemcpyHostToDevice, hipPointerAttribute_t, hipSuccess, hipUUID,
};

use crate::shell::{Exec, Failure, Handler, Reply, VendorClient, arg, hex, unhex, word};

mod vmm;

pub use vmm::OsHandle;

/// The shell's state: the table, and the socket this shell receives file descriptors on
/// (`fd.listen`).
pub struct HipShell {
    api: Arc<HipApi>,
    inbox: Option<crate::shell::fd_pass::Inbox>,
}

impl std::fmt::Debug for HipShell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HipShell")
            .field("source", self.api.source())
            .finish()
    }
}

impl HipShell {
    /// A shell on `api`.
    pub fn new(api: Arc<HipApi>) -> HipShell {
        HipShell { api, inbox: None }
    }

    /// The text of `hipGetErrorString(code)`, right after the failing call.
    fn failure(&self, api: &str, code: hipError_t) -> Failure {
        // SAFETY: hipGetErrorString returns a static NUL-terminated string (or NULL).
        let s = unsafe { (self.api.hipGetErrorString)(code) };
        let message = if s.is_null() {
            String::new()
        } else {
            // SAFETY: non-NULL and NUL-terminated per the HIP contract.
            unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned()
        };
        Failure::Vendor {
            api: api.to_owned(),
            code,
            message,
        }
    }

    fn check(&self, api: &str, code: hipError_t) -> Result<(), Failure> {
        if code == hipSuccess {
            Ok(())
        } else {
            Err(self.failure(api, code))
        }
    }
}

fn ptr(v: u64) -> *mut c_void {
    v as usize as *mut c_void
}

fn handle_bytes(text: &str) -> Result<[c_char; HIP_IPC_HANDLE_SIZE], Failure> {
    let bytes = unhex(text)?;
    if bytes.len() != HIP_IPC_HANDLE_SIZE {
        return Err(Failure::harness(format!(
            "an IPC handle is {HIP_IPC_HANDLE_SIZE} bytes, got {}",
            bytes.len()
        )));
    }
    let mut out = [0 as c_char; HIP_IPC_HANDLE_SIZE];
    for (o, b) in out.iter_mut().zip(bytes) {
        *o = b as c_char;
    }
    Ok(out)
}

fn handle_hex(reserved: &[c_char; HIP_IPC_HANDLE_SIZE]) -> String {
    let bytes: Vec<u8> = reserved.iter().map(|&c| c as u8).collect();
    hex(&bytes)
}

impl Handler for HipShell {
    fn handle(&mut self, name: &str, a: &[&str]) -> Reply {
        let api = Arc::clone(&self.api);
        let none = || Ok(Vec::new());
        let one = |v: u64| Ok(vec![v.to_string()]);
        // SAFETY: for every call below, out-pointers point at live locals; pointer and event
        // arguments are values this shell or its peer got from the runtime, or deliberately
        // invalid values whose rejection is the rule under test; handles are passed by
        // value as 64-byte structs; host buffers are live Vecs of the stated length.
        unsafe {
            match name {
                "version" => {
                    let mut v: c_int = 0;
                    self.check("hipRuntimeGetVersion", (api.hipRuntimeGetVersion)(&mut v))?;
                    Ok(vec![v.to_string()])
                }
                "version-null" => self
                    .check(
                        "hipRuntimeGetVersion",
                        (api.hipRuntimeGetVersion)(std::ptr::null_mut()),
                    )
                    .and_then(|()| none()),
                "error-name" => {
                    let code: hipError_t = arg(a, 0)?;
                    let s = (api.hipGetErrorName)(code);
                    if s.is_null() {
                        return Err(Failure::harness(format!("hipGetErrorName({code}) is NULL")));
                    }
                    Ok(vec![CStr::from_ptr(s).to_string_lossy().into_owned()])
                }
                "init" => self
                    .check("hipInit", (api.hipInit)(arg(a, 0)?))
                    .and_then(|()| none()),
                "device-count" => {
                    let mut n: c_int = 0;
                    self.check("hipGetDeviceCount", (api.hipGetDeviceCount)(&mut n))?;
                    Ok(vec![n.to_string()])
                }
                "set-device" => self
                    .check("hipSetDevice", (api.hipSetDevice)(arg(a, 0)?))
                    .and_then(|()| none()),
                "malloc" => {
                    let mut p: *mut c_void = std::ptr::null_mut();
                    self.check("hipMalloc", (api.hipMalloc)(&mut p, arg(a, 0)?))?;
                    one(p as usize as u64)
                }
                "free" => self
                    .check("hipFree", (api.hipFree)(ptr(arg(a, 0)?)))
                    .and_then(|()| none()),
                "write" => {
                    let dst = ptr(arg(a, 0)?);
                    let bytes = unhex(a.get(1).copied().unwrap_or(""))?;
                    self.check(
                        "hipMemcpy",
                        (api.hipMemcpy)(
                            dst,
                            bytes.as_ptr().cast(),
                            bytes.len(),
                            hipMemcpyHostToDevice,
                        ),
                    )
                    .and_then(|()| none())
                }
                "read" => {
                    let (src, len): (u64, usize) = (arg(a, 0)?, arg(a, 1)?);
                    let mut buf = vec![0u8; len];
                    self.check(
                        "hipMemcpy",
                        (api.hipMemcpy)(
                            buf.as_mut_ptr().cast(),
                            ptr(src),
                            len,
                            hipMemcpyDeviceToHost,
                        ),
                    )?;
                    Ok(vec![hex(&buf)])
                }
                "address-range" => {
                    let mut base: *mut c_void = std::ptr::null_mut();
                    let mut size = 0usize;
                    self.check(
                        "hipMemGetAddressRange",
                        (api.hipMemGetAddressRange)(&mut base, &mut size, ptr(arg(a, 0)?)),
                    )?;
                    Ok(vec![(base as usize).to_string(), size.to_string()])
                }
                "mem.handle" => {
                    let mut h = hipIpcMemHandle_t {
                        reserved: [0; HIP_IPC_HANDLE_SIZE],
                    };
                    self.check(
                        "hipIpcGetMemHandle",
                        (api.hipIpcGetMemHandle)(&mut h, ptr(arg(a, 0)?)),
                    )?;
                    Ok(vec![handle_hex(&h.reserved)])
                }
                "mem.handle-null" => self
                    .check(
                        "hipIpcGetMemHandle",
                        (api.hipIpcGetMemHandle)(std::ptr::null_mut(), ptr(arg(a, 0)?)),
                    )
                    .and_then(|()| none()),
                "mem.open" => {
                    let h = hipIpcMemHandle_t {
                        reserved: handle_bytes(a.first().copied().unwrap_or(""))?,
                    };
                    let flags: c_uint = arg(a, 1)?;
                    let mut p: *mut c_void = std::ptr::null_mut();
                    self.check(
                        "hipIpcOpenMemHandle",
                        (api.hipIpcOpenMemHandle)(&mut p, h, flags),
                    )?;
                    one(p as usize as u64)
                }
                "ptr.device" => {
                    // hipPointerGetAttributes: the device the memory at the pointer is on.
                    let mut attrs = hipPointerAttribute_t::zeroed();
                    self.check(
                        "hipPointerGetAttributes",
                        (api.hipPointerGetAttributes)(&mut attrs, ptr(arg(a, 0)?)),
                    )?;
                    Ok(vec![attrs.device.to_string()])
                }
                "mem.close" => self
                    .check(
                        "hipIpcCloseMemHandle",
                        (api.hipIpcCloseMemHandle)(ptr(arg(a, 0)?)),
                    )
                    .and_then(|()| none()),
                "event.create" => {
                    let mut e: hipEvent_t = std::ptr::null_mut();
                    self.check(
                        "hipEventCreateWithFlags",
                        (api.hipEventCreateWithFlags)(&mut e, arg(a, 0)?),
                    )?;
                    one(e as usize as u64)
                }
                "event.destroy" => self
                    .check(
                        "hipEventDestroy",
                        (api.hipEventDestroy)(arg::<u64>(a, 0)? as usize as hipEvent_t),
                    )
                    .and_then(|()| none()),
                "event.record" => self
                    .check(
                        "hipEventRecord",
                        (api.hipEventRecord)(
                            arg::<u64>(a, 0)? as usize as hipEvent_t,
                            std::ptr::null_mut(),
                        ),
                    )
                    .and_then(|()| none()),
                "event.sync" => self
                    .check(
                        "hipEventSynchronize",
                        (api.hipEventSynchronize)(arg::<u64>(a, 0)? as usize as hipEvent_t),
                    )
                    .and_then(|()| none()),
                "event.query" => self
                    .check(
                        "hipEventQuery",
                        (api.hipEventQuery)(arg::<u64>(a, 0)? as usize as hipEvent_t),
                    )
                    .and_then(|()| none()),
                "stream.wait-event" => {
                    let (e, flags): (u64, c_uint) = (arg(a, 0)?, arg(a, 1)?);
                    self.check(
                        "hipStreamWaitEvent",
                        (api.hipStreamWaitEvent)(
                            std::ptr::null_mut(),
                            e as usize as hipEvent_t,
                            flags,
                        ),
                    )
                    .and_then(|()| none())
                }
                "event.handle" => {
                    let mut h = hipIpcEventHandle_t {
                        reserved: [0; HIP_IPC_HANDLE_SIZE],
                    };
                    self.check(
                        "hipIpcGetEventHandle",
                        (api.hipIpcGetEventHandle)(
                            &mut h,
                            arg::<u64>(a, 0)? as usize as hipEvent_t,
                        ),
                    )?;
                    Ok(vec![handle_hex(&h.reserved)])
                }
                "event.open" => {
                    let h = hipIpcEventHandle_t {
                        reserved: handle_bytes(a.first().copied().unwrap_or(""))?,
                    };
                    let mut e: hipEvent_t = std::ptr::null_mut();
                    self.check(
                        "hipIpcOpenEventHandle",
                        (api.hipIpcOpenEventHandle)(&mut e, h),
                    )?;
                    one(e as usize as u64)
                }
                "peer.can" => {
                    let (d, p): (c_int, c_int) = (arg(a, 0)?, arg(a, 1)?);
                    let mut v: c_int = 0;
                    self.check(
                        "hipDeviceCanAccessPeer",
                        (api.hipDeviceCanAccessPeer)(&mut v, d, p),
                    )?;
                    Ok(vec![v.to_string()])
                }
                "peer.enable" => {
                    let (p, flags): (c_int, c_uint) = (arg(a, 0)?, arg(a, 1)?);
                    self.check(
                        "hipDeviceEnablePeerAccess",
                        (api.hipDeviceEnablePeerAccess)(p, flags),
                    )
                    .and_then(|()| none())
                }
                "dev.pci-bus-id" => {
                    // dev.pci-bus-id <device> <len>: the text written into a `len`-byte buffer.
                    let (d, len): (c_int, c_int) = (arg(a, 0)?, arg(a, 1)?);
                    let mut buf = vec![0 as c_char; 64];
                    let len = len.clamp(0, 64);
                    self.check(
                        "hipDeviceGetPCIBusId",
                        (api.hipDeviceGetPCIBusId)(buf.as_mut_ptr(), len, d),
                    )?;
                    Ok(vec![
                        CStr::from_ptr(buf.as_ptr()).to_string_lossy().into_owned(),
                    ])
                }
                "dev.by-pci-bus-id" => {
                    let text = std::ffi::CString::new(a.first().copied().unwrap_or(""))
                        .map_err(|_| Failure::harness("a bus id with a NUL"))?;
                    let mut d: c_int = -1;
                    self.check(
                        "hipDeviceGetByPCIBusId",
                        (api.hipDeviceGetByPCIBusId)(&mut d, text.as_ptr()),
                    )?;
                    Ok(vec![d.to_string()])
                }
                "dev.uuid" => {
                    let f = api.hipDeviceGetUuid.ok_or_else(|| {
                        Failure::harness(
                            "this runtime lacks hipDeviceGetUuid (too old for the rule)",
                        )
                    })?;
                    let mut u = hipUUID::default();
                    self.check("hipDeviceGetUuid", f(&mut u, arg(a, 0)?))?;
                    Ok(vec![
                        u.bytes
                            .iter()
                            .map(|b| format!("{:02x}", *b as u8))
                            .collect(),
                    ])
                }
                _ if name.starts_with("vmm.") || name.starts_with("fd.") || name == "ptr.attr" => {
                    self.vmm(name, a)
                }
                other => Err(Failure::harness(format!(
                    "unknown HIP shell command `{other}`"
                ))),
            }
        }
    }
}

/// The typed client of a HIP shell, local or remote.
#[derive(Debug)]
pub struct Hip<E>(pub E);

impl<E: Exec> VendorClient for Hip<E> {
    fn run(&mut self, line: String) -> Reply {
        self.0.exec(&line)
    }
}

impl<E: Exec> Hip<E> {
    /// `hipPointerGetAttributes(ptr).device`: the device the memory is on.
    pub fn pointer_device(&mut self, ptr: u64) -> Result<i32, Failure> {
        word(&self.run(format!("ptr.device {ptr}"))?, 0)
    }

    /// `hipRuntimeGetVersion`: the `HIP_VERSION` encoding.
    pub fn version(&mut self) -> Result<i32, Failure> {
        word(&self.run("version".into())?, 0)
    }

    /// `hipRuntimeGetVersion(NULL)`.
    pub fn version_null(&mut self) -> Result<(), Failure> {
        self.run("version-null".into()).map(drop)
    }

    /// `hipGetErrorName(code)`.
    pub fn error_name(&mut self, code: i32) -> Result<String, Failure> {
        word(&self.run(format!("error-name {code}"))?, 0)
    }

    /// `hipInit(flags)`.
    pub fn init(&mut self, flags: u32) -> Result<(), Failure> {
        self.run(format!("init {flags}")).map(drop)
    }

    /// `hipSetDevice`.
    pub fn set_device(&mut self, dev: u32) -> Result<(), Failure> {
        self.run(format!("set-device {dev}")).map(drop)
    }

    /// `hipGetDeviceCount`.
    pub fn device_count(&mut self) -> Result<i32, Failure> {
        word(&self.run("device-count".into())?, 0)
    }

    /// `hipDeviceGetPCIBusId` into a buffer of `len` bytes (at most 64): the text.
    pub fn pci_bus_id(&mut self, dev: i32, len: i32) -> Result<String, Failure> {
        word(&self.run(format!("dev.pci-bus-id {dev} {len}"))?, 0)
    }

    /// `hipDeviceGetByPCIBusId`: this process's ordinal of the device at `bus_id`.
    pub fn device_by_pci_bus_id(&mut self, bus_id: &str) -> Result<i32, Failure> {
        word(&self.run(format!("dev.by-pci-bus-id {bus_id}"))?, 0)
    }

    /// `hipDeviceGetUuid`: the 16 bytes as hex.
    pub fn device_uuid(&mut self, dev: i32) -> Result<String, Failure> {
        word(&self.run(format!("dev.uuid {dev}"))?, 0)
    }

    /// `hipIpcGetMemHandle`: the handle as hex.
    pub fn mem_handle(&mut self, ptr: u64) -> Result<String, Failure> {
        word(&self.run(format!("mem.handle {ptr}"))?, 0)
    }

    /// `hipIpcGetMemHandle(NULL, ptr)`.
    pub fn mem_handle_null(&mut self, ptr: u64) -> Result<(), Failure> {
        self.run(format!("mem.handle-null {ptr}")).map(drop)
    }

    /// `hipIpcOpenMemHandle`: the address.
    pub fn mem_open(&mut self, handle: &str, flags: u32) -> Result<u64, Failure> {
        word(&self.run(format!("mem.open {handle} {flags}"))?, 0)
    }

    /// `hipIpcCloseMemHandle`.
    pub fn mem_close(&mut self, ptr: u64) -> Result<(), Failure> {
        self.run(format!("mem.close {ptr}")).map(drop)
    }

    /// `hipEventCreateWithFlags`.
    pub fn event_create(&mut self, flags: u32) -> Result<u64, Failure> {
        word(&self.run(format!("event.create {flags}"))?, 0)
    }

    /// `hipEventDestroy`.
    pub fn event_destroy(&mut self, event: u64) -> Result<(), Failure> {
        self.run(format!("event.destroy {event}")).map(drop)
    }

    /// `hipEventRecord` on the null stream.
    pub fn event_record(&mut self, event: u64) -> Result<(), Failure> {
        self.run(format!("event.record {event}")).map(drop)
    }

    /// `hipEventSynchronize`.
    pub fn event_sync(&mut self, event: u64) -> Result<(), Failure> {
        self.run(format!("event.sync {event}")).map(drop)
    }

    /// `hipEventQuery` (`hipErrorNotReady` is a failure here).
    pub fn event_query(&mut self, event: u64) -> Result<(), Failure> {
        self.run(format!("event.query {event}")).map(drop)
    }

    /// `hipStreamWaitEvent` of the null stream on `event` with `flags`.
    pub fn stream_wait_event(&mut self, event: u64, flags: u32) -> Result<(), Failure> {
        self.run(format!("stream.wait-event {event} {flags}"))
            .map(drop)
    }

    /// `hipIpcGetEventHandle`: the handle as hex.
    pub fn event_handle(&mut self, event: u64) -> Result<String, Failure> {
        word(&self.run(format!("event.handle {event}"))?, 0)
    }

    /// `hipIpcOpenEventHandle`: the event.
    pub fn event_open(&mut self, handle: &str) -> Result<u64, Failure> {
        word(&self.run(format!("event.open {handle}"))?, 0)
    }

    /// `hipDeviceCanAccessPeer`.
    pub fn can_access_peer(&mut self, dev: i32, peer: i32) -> Result<bool, Failure> {
        Ok(word::<i32>(&self.run(format!("peer.can {dev} {peer}"))?, 0)? != 0)
    }

    /// `hipDeviceEnablePeerAccess` from the current device.
    pub fn enable_peer(&mut self, peer: i32, flags: u32) -> Result<(), Failure> {
        self.run(format!("peer.enable {peer} {flags}")).map(drop)
    }
}
