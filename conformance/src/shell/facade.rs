//! The facade shell: devipc's safe API (`Runtime`, `SharedBuffer`, `ImportedBuffer`,
//! `Signal`) driven one call per command, for the peers of portable scenarios, and
//! [`Facade`], its typed client.
//!
//! Portable rules run through the facade, exactly as a framework uses devipc: the
//! scenario's own process calls the Rust API directly, and its peers run this shell.
//! Objects live in the shell under small numeric ids; tokens travel in their text form
//! (`devipc3:...`), so every cross-process step also exercises the token codec. A
//! failure is reported as its [`Error`] variant name and message.

use std::collections::HashMap;
use std::ffi::c_void;
use std::time::Duration;

use devipc::raw::{Backend, DeviceIpc, Mechanism};
use devipc::{
    AllocateOptions, DeviceId, DevicePtr, Error, ExportOptions, ImportedBuffer, MemToken,
    ProcessId, Runtime, SharedBuffer, Signal, SignalToken,
};

use crate::counting;
use crate::shell::{Exec, Failure, Handler, Reply, arg, hex, unhex, word};

/// The name of an [`Error`] variant, e.g. `Timeout` or `InvalidArgument`, for reports and
/// the wire: [`Error::kind`] in the variant's own spelling.
pub fn error_kind(e: &Error) -> String {
    e.kind()
        .split('_')
        .map(|word| {
            let mut chars = word.chars();
            chars.next().map_or_else(String::new, |first| {
                first.to_ascii_uppercase().to_string() + chars.as_str()
            })
        })
        .collect()
}

/// A devipc error as a shell failure.
pub fn devipc_failure(e: &Error) -> Failure {
    Failure::Devipc {
        kind: error_kind(e),
        message: e.to_string(),
    }
}

/// `any` (any process may import) or `trust` (granted processes only).
pub fn opts_word(opts: ExportOptions) -> &'static str {
    if opts == ExportOptions::any_process() {
        "any"
    } else {
        "trust"
    }
}

fn parse_opts(word: &str) -> Result<ExportOptions, Failure> {
    match word {
        "any" => Ok(ExportOptions::any_process()),
        "trust" => Ok(ExportOptions::granted_only()),
        other => Err(Failure::harness(format!("bad export option `{other}`"))),
    }
}

/// An object the shell holds.
#[derive(Debug)]
enum Obj {
    Buffer(SharedBuffer),
    Import(ImportedBuffer),
    Signal(Signal),
}

/// The shell's state: the runtime, how `alloc` allocates, and the objects made through
/// it.
#[derive(Debug)]
pub struct FacadeShell {
    rt: Runtime,
    allocation: Option<Mechanism>,
    objects: HashMap<u64, Obj>,
    next: u64,
}

impl FacadeShell {
    /// A shell on `rt` whose `alloc` allocates for `allocation` (`Runtime::allocate_with`),
    /// or the backend's default way when `None` (`Runtime::allocate`): the run's
    /// [`Target::allocation`](crate::target::Target::allocation).
    pub fn new(rt: Runtime, allocation: Option<Mechanism>) -> FacadeShell {
        FacadeShell {
            rt,
            allocation,
            objects: HashMap::new(),
            next: 1,
        }
    }

    fn keep(&mut self, obj: Obj) -> Reply {
        let id = self.next;
        self.next += 1;
        self.objects.insert(id, obj);
        Ok(vec![id.to_string()])
    }

    fn get(&self, id: u64) -> Result<&Obj, Failure> {
        self.objects
            .get(&id)
            .ok_or_else(|| Failure::harness(format!("no object {id}")))
    }

    fn signal(&self, id: u64) -> Result<&Signal, Failure> {
        match self.get(id)? {
            Obj::Signal(s) => Ok(s),
            _ => Err(Failure::harness(format!("object {id} is not a signal"))),
        }
    }
}

fn d(e: Error) -> Failure {
    devipc_failure(&e)
}

fn mem_token(text: &str) -> Result<MemToken, Failure> {
    text.parse().map_err(d)
}

fn signal_token(text: &str) -> Result<SignalToken, Failure> {
    text.parse().map_err(d)
}

/// Allocates `size` bytes of framework-style memory with the vendor's own allocator
/// (`aclrtMalloc` / `hipMalloc`) on `device`, outside devipc: what `export_external`
/// exports.
fn vendor_malloc(backend: &Backend, device: u32, size: usize) -> Result<u64, Failure> {
    let mut p: *mut c_void = std::ptr::null_mut();
    let (api_name, code) = match backend {
        Backend::Ascend(b) => {
            let api = b.api();
            // SAFETY: plain device id; `p` is a valid out-pointer; the policy is a
            // documented enumerator.
            let code = unsafe {
                let c = (api.aclrtSetDevice)(device as i32);
                if c != 0 {
                    c
                } else {
                    (api.aclrtMalloc)(
                        &mut p,
                        size,
                        devipc_ascend_sys::types::ACL_MEM_MALLOC_HUGE_FIRST,
                    )
                }
            };
            ("aclrtMalloc", code)
        }
        Backend::Hip(b) => {
            let api = b.api();
            // SAFETY: plain device id; `p` is a valid out-pointer.
            let code = unsafe {
                let c = (api.hipSetDevice)(device as i32);
                if c != 0 {
                    c
                } else {
                    (api.hipMalloc)(&mut p, size)
                }
            };
            ("hipMalloc", code)
        }
        _ => return Err(Failure::harness("a backend this suite does not know")),
    };
    if code != 0 {
        return Err(Failure::Vendor {
            api: api_name.into(),
            code,
            message: String::new(),
        });
    }
    Ok(p as usize as u64)
}

/// Frees memory from [`vendor_malloc`]; on Ascend first destroys the IPC key devipc
/// exported for it (`AscendBackend::close_external`), as the vendor's order requires.
fn vendor_free(backend: &Backend, device: u32, ptr: u64) -> Result<(), Failure> {
    let p = ptr as usize as *mut c_void;
    let (api_name, code) = match backend {
        Backend::Ascend(b) => {
            b.close_external(DeviceId(device), DevicePtr(ptr))
                .map_err(d)?;
            // SAFETY: `p` came from aclrtMalloc in this process.
            ("aclrtFree", unsafe { (b.api().aclrtFree)(p) })
        }
        // SAFETY: `p` came from hipMalloc in this process.
        Backend::Hip(b) => ("hipFree", unsafe { (b.api().hipFree)(p) }),
        _ => return Err(Failure::harness("a backend this suite does not know")),
    };
    if code != 0 {
        return Err(Failure::Vendor {
            api: api_name.into(),
            code,
            message: String::new(),
        });
    }
    Ok(())
}

impl Handler for FacadeShell {
    fn handle(&mut self, name: &str, a: &[&str]) -> Reply {
        let none = || Ok(Vec::new());
        match name {
            "pid" => Ok(vec![self.rt.process_id().0.to_string()]),
            "device-count" => Ok(vec![self.rt.device_count().map_err(d)?.to_string()]),
            "alloc" => {
                let (device, size) = (DeviceId(arg(a, 0)?), arg(a, 1)?);
                let buf = match self.allocation {
                    None => self.rt.allocate(device, size),
                    Some(m) => self
                        .rt
                        .allocate_with(device, size, AllocateOptions::mechanism(m)),
                }
                .map_err(d)?;
                self.keep(Obj::Buffer(buf))
            }
            "write" => {
                let (id, off): (u64, usize) = (arg(a, 0)?, arg(a, 1)?);
                let bytes = unhex(a.get(2).copied().unwrap_or(""))?;
                match self.get(id)? {
                    Obj::Buffer(b) => b.write(off, &bytes).map_err(d)?,
                    Obj::Import(i) => i.write(off, &bytes).map_err(d)?,
                    Obj::Signal(_) => return Err(Failure::harness("write to a signal")),
                }
                none()
            }
            "read" => {
                let (id, off, len): (u64, usize, usize) = (arg(a, 0)?, arg(a, 1)?, arg(a, 2)?);
                let mut buf = vec![0u8; len];
                match self.get(id)? {
                    Obj::Buffer(b) => b.read(off, &mut buf).map_err(d)?,
                    Obj::Import(i) => i.read(off, &mut buf).map_err(d)?,
                    Obj::Signal(_) => return Err(Failure::harness("read from a signal")),
                }
                Ok(vec![hex(&buf)])
            }
            "export" => {
                let (id, start, end): (u64, usize, usize) = (arg(a, 0)?, arg(a, 1)?, arg(a, 2)?);
                let opts = parse_opts(a.get(3).copied().unwrap_or("trust"))?;
                let Obj::Buffer(b) = self.get(id)? else {
                    return Err(Failure::harness(format!("object {id} is not a buffer")));
                };
                Ok(vec![b.export_range(start..end, opts).map_err(d)?.to_text()])
            }
            "grant" => {
                let token = mem_token(a.first().copied().unwrap_or(""))?;
                self.rt.grant(&token, &[ProcessId(arg(a, 1)?)]).map_err(d)?;
                none()
            }
            "import" => {
                let token = mem_token(a.first().copied().unwrap_or(""))?;
                let imp = self.rt.import(&token, DeviceId(arg(a, 1)?)).map_err(d)?;
                let local = u8::from(imp.is_local());
                let mut reply = self.keep(Obj::Import(imp))?;
                reply.push(local.to_string());
                Ok(reply)
            }
            "place" => {
                // `Runtime::import_on_exporter_device`: the import's id and device, or
                // `none` when the exporter's device is not visible here.
                let token = mem_token(a.first().copied().unwrap_or(""))?;
                match self.rt.import_on_exporter_device(&token) {
                    Ok(imp) => {
                        let device = imp.device().0.to_string();
                        let mut reply = self.keep(Obj::Import(imp))?;
                        reply.push(device);
                        Ok(reply)
                    }
                    Err(devipc::Error::DeviceNotVisible { .. }) => Ok(vec!["none".into()]),
                    Err(e) => Err(d(e)),
                }
            }
            "drop" => {
                let id: u64 = arg(a, 0)?;
                self.objects
                    .remove(&id)
                    .ok_or_else(|| Failure::harness(format!("no object {id}")))?;
                none()
            }
            "live-imports" => Ok(vec![self.rt.live_imports().to_string()]),
            "calls" => {
                if !counting::active() {
                    return Err(Failure::harness("this peer does not count vendor calls"));
                }
                Ok(vec![
                    counting::calls(a.first().copied().unwrap_or("")).to_string(),
                ])
            }
            "signal.create" => {
                let s = self.rt.create_signal(DeviceId(arg(a, 0)?)).map_err(d)?;
                self.keep(Obj::Signal(s))
            }
            "signal.export" => {
                let id: u64 = arg(a, 0)?;
                let opts = parse_opts(a.get(1).copied().unwrap_or("trust"))?;
                Ok(vec![self.signal(id)?.export(opts).map_err(d)?.to_text()])
            }
            "signal.grant" => {
                let id: u64 = arg(a, 0)?;
                let token = signal_token(a.get(1).copied().unwrap_or(""))?;
                self.signal(id)?
                    .grant(&token, &[ProcessId(arg(a, 2)?)])
                    .map_err(d)?;
                none()
            }
            "signal.import" => {
                let token = signal_token(a.first().copied().unwrap_or(""))?;
                let s = self
                    .rt
                    .import_signal(&token, DeviceId(arg(a, 1)?))
                    .map_err(d)?;
                self.keep(Obj::Signal(s))
            }
            "notify" => {
                self.signal(arg(a, 0)?)?.notify().map_err(d)?;
                none()
            }
            "wait" => {
                let (id, ms): (u64, u64) = (arg(a, 0)?, arg(a, 1)?);
                self.signal(id)?
                    .wait(Some(Duration::from_millis(ms)))
                    .map_err(d)?;
                none()
            }
            "external.alloc" => {
                let p = vendor_malloc(self.rt.backend(), arg(a, 0)?, arg(a, 1)?)?;
                Ok(vec![p.to_string()])
            }
            "external.free" => {
                vendor_free(self.rt.backend(), arg(a, 0)?, arg(a, 1)?)?;
                none()
            }
            "external.close" => {
                let (dev, p): (u32, u64) = (arg(a, 0)?, arg(a, 1)?);
                self.rt
                    .close_external(DeviceId(dev), DevicePtr(p))
                    .map_err(d)?;
                none()
            }
            "external.write" => {
                let p: u64 = arg(a, 0)?;
                let bytes = unhex(a.get(1).copied().unwrap_or(""))?;
                // SAFETY: the conformance driver passes pointers into blocks this shell's
                // `external.alloc` returned and has not freed (a rule that breaks this on
                // purpose runs on the emulator, which checks every copy).
                unsafe { self.rt.backend().write(DevicePtr(p), &bytes) }.map_err(d)?;
                none()
            }
            "external.read" => {
                let (p, len): (u64, usize) = (arg(a, 0)?, arg(a, 1)?);
                let mut buf = vec![0u8; len];
                // SAFETY: as for `external.write`.
                unsafe { self.rt.backend().read(DevicePtr(p), &mut buf) }.map_err(d)?;
                Ok(vec![hex(&buf)])
            }
            "external.export" => {
                let (dev, p, len): (u32, u64, usize) = (arg(a, 0)?, arg(a, 1)?, arg(a, 2)?);
                let opts = parse_opts(a.get(3).copied().unwrap_or("trust"))?;
                let token = self
                    .rt
                    .export_external(DeviceId(dev), DevicePtr(p), len, opts)
                    .map_err(d)?;
                Ok(vec![token.to_text()])
            }
            other => Err(Failure::harness(format!(
                "unknown facade shell command `{other}`"
            ))),
        }
    }
}

/// The typed client of a facade shell (in practice a peer).
#[derive(Debug)]
pub struct Facade<E>(pub E);

impl<E: Exec> Facade<E> {
    fn run(&mut self, line: String) -> Reply {
        self.0.exec(&line)
    }

    /// `Runtime::process_id`.
    pub fn pid(&mut self) -> Result<ProcessId, Failure> {
        Ok(ProcessId(word(&self.run("pid".into())?, 0)?))
    }

    /// `Runtime::allocate` (or `allocate_with` the run's mechanism on an allocation
    /// variant, see [`FacadeShell::new`]): the buffer's id.
    pub fn alloc(&mut self, device: u32, size: usize) -> Result<u64, Failure> {
        word(&self.run(format!("alloc {device} {size}"))?, 0)
    }

    /// `write` on a buffer or import.
    pub fn write(&mut self, id: u64, offset: usize, bytes: &[u8]) -> Result<(), Failure> {
        self.run(format!("write {id} {offset} {}", hex(bytes)))
            .map(drop)
    }

    /// `read` on a buffer or import.
    pub fn read(&mut self, id: u64, offset: usize, len: usize) -> Result<Vec<u8>, Failure> {
        unhex(&word::<String>(
            &self.run(format!("read {id} {offset} {len}"))?,
            0,
        )?)
    }

    /// `SharedBuffer::export_range`: the token.
    pub fn export(
        &mut self,
        id: u64,
        start: usize,
        end: usize,
        opts: ExportOptions,
    ) -> Result<MemToken, Failure> {
        let text: String = word(
            &self.run(format!("export {id} {start} {end} {}", opts_word(opts)))?,
            0,
        )?;
        mem_token(&text)
    }

    /// `Runtime::grant` of one peer.
    pub fn grant(&mut self, token: &MemToken, peer: ProcessId) -> Result<(), Failure> {
        self.run(format!("grant {} {}", token.to_text(), peer.0))
            .map(drop)
    }

    /// `Runtime::import`: (id, whether it is a local view).
    pub fn import(&mut self, token: &MemToken, device: u32) -> Result<(u64, bool), Failure> {
        let r = self.run(format!("import {} {device}", token.to_text()))?;
        Ok((word(&r, 0)?, word::<u8>(&r, 1)? != 0))
    }

    /// `Runtime::import_on_exporter_device`: `Some((id, device))`, or `None` when the
    /// exporter's device is not visible to the peer.
    pub fn place(&mut self, token: &MemToken) -> Result<Option<(u64, u32)>, Failure> {
        let r = self.run(format!("place {}", token.to_text()))?;
        if r.first().is_some_and(|w| w == "none") {
            return Ok(None);
        }
        Ok(Some((word(&r, 0)?, word(&r, 1)?)))
    }

    /// Drops an object.
    pub fn drop_obj(&mut self, id: u64) -> Result<(), Failure> {
        self.run(format!("drop {id}")).map(drop)
    }

    /// `Runtime::live_imports`.
    pub fn live_imports(&mut self) -> Result<usize, Failure> {
        word(&self.run("live-imports".into())?, 0)
    }

    /// Vendor calls of `api` so far (counting peers only).
    pub fn calls(&mut self, api: &str) -> Result<u64, Failure> {
        word(&self.run(format!("calls {api}"))?, 0)
    }

    /// `Runtime::create_signal`.
    pub fn signal_create(&mut self, device: u32) -> Result<u64, Failure> {
        word(&self.run(format!("signal.create {device}"))?, 0)
    }

    /// `Signal::export`.
    pub fn signal_export(&mut self, id: u64, opts: ExportOptions) -> Result<SignalToken, Failure> {
        let text: String = word(
            &self.run(format!("signal.export {id} {}", opts_word(opts)))?,
            0,
        )?;
        signal_token(&text)
    }

    /// `Signal::grant` of one peer.
    pub fn signal_grant(
        &mut self,
        id: u64,
        token: &SignalToken,
        peer: ProcessId,
    ) -> Result<(), Failure> {
        self.run(format!("signal.grant {id} {} {}", token.to_text(), peer.0))
            .map(drop)
    }

    /// `Runtime::import_signal`.
    pub fn signal_import(&mut self, token: &SignalToken, device: u32) -> Result<u64, Failure> {
        word(
            &self.run(format!("signal.import {} {device}", token.to_text()))?,
            0,
        )
    }

    /// `Signal::notify`.
    pub fn notify(&mut self, id: u64) -> Result<(), Failure> {
        self.run(format!("notify {id}")).map(drop)
    }

    /// `Signal::wait` with a timeout.
    pub fn wait(&mut self, id: u64, timeout: Duration) -> Result<(), Failure> {
        self.run(format!("wait {id} {}", timeout.as_millis()))
            .map(drop)
    }

    /// Vendor-allocated memory (`aclrtMalloc` / `hipMalloc`): its address.
    pub fn external_alloc(&mut self, device: u32, size: usize) -> Result<u64, Failure> {
        word(&self.run(format!("external.alloc {device} {size}"))?, 0)
    }

    /// Frees memory from [`Facade::external_alloc`].
    pub fn external_free(&mut self, device: u32, ptr: u64) -> Result<(), Failure> {
        self.run(format!("external.free {device} {ptr}")).map(drop)
    }

    /// `Runtime::close_external` alone (without freeing).
    pub fn external_close(&mut self, device: u32, ptr: u64) -> Result<(), Failure> {
        self.run(format!("external.close {device} {ptr}")).map(drop)
    }

    /// Backend `write` to a raw address.
    pub fn external_write(&mut self, ptr: u64, bytes: &[u8]) -> Result<(), Failure> {
        self.run(format!("external.write {ptr} {}", hex(bytes)))
            .map(drop)
    }

    /// Backend `read` from a raw address.
    pub fn external_read(&mut self, ptr: u64, len: usize) -> Result<Vec<u8>, Failure> {
        unhex(&word::<String>(
            &self.run(format!("external.read {ptr} {len}"))?,
            0,
        )?)
    }

    /// `Runtime::export_external`.
    pub fn external_export(
        &mut self,
        device: u32,
        ptr: u64,
        len: usize,
        opts: ExportOptions,
    ) -> Result<MemToken, Failure> {
        let text: String = word(
            &self.run(format!(
                "external.export {device} {ptr} {len} {}",
                opts_word(opts)
            ))?,
            0,
        )?;
        mem_token(&text)
    }
}

impl Facade<crate::shell::Remote> {
    /// Starts `wait` in the peer without waiting for it to return.
    pub fn wait_start(&mut self, id: u64, timeout: Duration) -> Result<(), Failure> {
        self.0.send(&format!("wait {id} {}", timeout.as_millis()))
    }

    /// Collects the result of [`Facade::wait_start`].
    pub fn wait_end(&mut self) -> Result<(), Failure> {
        self.0.reply().map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_kinds_are_the_variant_names() {
        assert_eq!(error_kind(&Error::invalid_argument("x")), "InvalidArgument");
        assert_eq!(error_kind(&Error::invalid_token("x")), "InvalidToken");
        assert_eq!(
            error_kind(&Error::NoBackendStarted { attempts: vec![] }),
            "NoBackendStarted"
        );
        assert_eq!(
            error_kind(&Error::io("x", std::io::Error::other("y"))),
            "Io"
        );
    }
}
