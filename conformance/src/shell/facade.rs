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
use crate::shell::{
    Exec, Failure, Handler, Remote, Reply, Request, answer, done, hex, unhex, value,
};

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

    /// Keeps `obj` under a new id: the id.
    fn keep(&mut self, obj: Obj) -> u64 {
        let id = self.next;
        self.next += 1;
        self.objects.insert(id, obj);
        id
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

/// A facade shell command. Objects are named by the ids the shell gave them; tokens
/// travel in their text form.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum FacadeCommand {
    /// `Runtime::process_id`.
    Pid,
    /// `Runtime::device_count`.
    DeviceCount,
    /// `Runtime::allocate` (or `allocate_with` the run's mechanism, see
    /// [`FacadeShell::new`]): the buffer's id.
    Alloc {
        /// The device.
        device: u32,
        /// Bytes.
        size: usize,
    },
    /// `write` on a buffer or import.
    Write {
        /// The object.
        id: u64,
        /// Where.
        offset: usize,
        /// The bytes.
        #[serde(with = "crate::shell::hex_bytes")]
        bytes: Vec<u8>,
    },
    /// `read` on a buffer or import: the bytes as hex.
    Read {
        /// The object.
        id: u64,
        /// Where.
        offset: usize,
        /// Bytes.
        len: usize,
    },
    /// `SharedBuffer::export_range`: the token.
    Export {
        /// The buffer.
        id: u64,
        /// The range's start.
        start: usize,
        /// The range's end.
        end: usize,
        /// The export options.
        #[serde(with = "opts")]
        opts: ExportOptions,
    },
    /// `Runtime::grant` of one peer.
    Grant {
        /// The memory token.
        token: String,
        /// The peer's pid.
        peer: u32,
    },
    /// `Runtime::import`: (id, whether it is a local view).
    Import {
        /// The memory token.
        token: String,
        /// The device.
        device: u32,
    },
    /// `Runtime::import_on_exporter_device`: the import's id and device, or `None` when
    /// the exporter's device is not visible here.
    Place {
        /// The memory token.
        token: String,
    },
    /// Drops an object.
    Drop {
        /// The object.
        id: u64,
    },
    /// `Runtime::live_imports`.
    LiveImports,
    /// Vendor calls of `api` so far (counting peers only).
    Calls {
        /// The vendor function.
        api: String,
    },
    /// `Runtime::create_signal`: its id.
    SignalCreate {
        /// The device.
        device: u32,
    },
    /// `Signal::export`: the token.
    SignalExport {
        /// The signal.
        id: u64,
        /// The export options.
        #[serde(with = "opts")]
        opts: ExportOptions,
    },
    /// `Signal::grant` of one peer.
    SignalGrant {
        /// The signal.
        id: u64,
        /// Its token.
        token: String,
        /// The peer's pid.
        peer: u32,
    },
    /// `Runtime::import_signal`: its id.
    SignalImport {
        /// The signal token.
        token: String,
        /// The device.
        device: u32,
    },
    /// `Signal::notify`.
    Notify {
        /// The signal.
        id: u64,
    },
    /// `Signal::wait` with a timeout.
    Wait {
        /// The signal.
        id: u64,
        /// The timeout in milliseconds.
        ms: u64,
    },
    /// Vendor-allocated memory (`aclrtMalloc` / `hipMalloc`): its address.
    ExternalAlloc {
        /// The device.
        device: u32,
        /// Bytes.
        size: usize,
    },
    /// Frees memory from [`FacadeCommand::ExternalAlloc`].
    ExternalFree {
        /// The device.
        device: u32,
        /// The address.
        ptr: u64,
    },
    /// `Runtime::close_external` alone (without freeing).
    ExternalClose {
        /// The device.
        device: u32,
        /// The address.
        ptr: u64,
    },
    /// Backend `write` to a raw address.
    ExternalWrite {
        /// The address.
        ptr: u64,
        /// The bytes.
        #[serde(with = "crate::shell::hex_bytes")]
        bytes: Vec<u8>,
    },
    /// Backend `read` from a raw address: the bytes as hex.
    ExternalRead {
        /// The address.
        ptr: u64,
        /// Bytes.
        len: usize,
    },
    /// `Runtime::export_external`: the token.
    ExternalExport {
        /// The device.
        device: u32,
        /// The address.
        ptr: u64,
        /// Bytes.
        len: usize,
        /// The export options.
        #[serde(with = "opts")]
        opts: ExportOptions,
    },
}

/// Serde for [`ExportOptions`] as [`opts_word`].
mod opts {
    use devipc::ExportOptions;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(opts: &ExportOptions, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(super::opts_word(*opts))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<ExportOptions, D::Error> {
        let word = String::deserialize(d)?;
        super::parse_opts(&word).map_err(serde::de::Error::custom)
    }
}

impl Handler for FacadeShell {
    type Command = FacadeCommand;

    fn handle(&mut self, command: FacadeCommand) -> Reply {
        match command {
            FacadeCommand::Pid => value(self.rt.process_id().0),
            FacadeCommand::DeviceCount => value(self.rt.device_count().map_err(d)?),
            FacadeCommand::Alloc { device, size } => {
                let device = DeviceId(device);
                let buf = match self.allocation {
                    None => self.rt.allocate(device, size),
                    Some(m) => self
                        .rt
                        .allocate_with(device, size, AllocateOptions::mechanism(m)),
                }
                .map_err(d)?;
                value(self.keep(Obj::Buffer(buf)))
            }
            FacadeCommand::Write { id, offset, bytes } => {
                match self.get(id)? {
                    Obj::Buffer(b) => b.write(offset, &bytes).map_err(d)?,
                    Obj::Import(i) => i.write(offset, &bytes).map_err(d)?,
                    Obj::Signal(_) => return Err(Failure::harness("write to a signal")),
                }
                done()
            }
            FacadeCommand::Read { id, offset, len } => {
                let mut buf = vec![0u8; len];
                match self.get(id)? {
                    Obj::Buffer(b) => b.read(offset, &mut buf).map_err(d)?,
                    Obj::Import(i) => i.read(offset, &mut buf).map_err(d)?,
                    Obj::Signal(_) => return Err(Failure::harness("read from a signal")),
                }
                value(hex(&buf))
            }
            FacadeCommand::Export {
                id,
                start,
                end,
                opts,
            } => {
                let Obj::Buffer(b) = self.get(id)? else {
                    return Err(Failure::harness(format!("object {id} is not a buffer")));
                };
                value(b.export_range(start..end, opts).map_err(d)?.to_text())
            }
            FacadeCommand::Grant { token, peer } => {
                let token = mem_token(&token)?;
                self.rt.grant(&token, &[ProcessId(peer)]).map_err(d)?;
                done()
            }
            FacadeCommand::Import { token, device } => {
                let token = mem_token(&token)?;
                let imp = self.rt.import(&token, DeviceId(device)).map_err(d)?;
                let local = imp.is_local();
                let id = self.keep(Obj::Import(imp));
                value((id, local))
            }
            FacadeCommand::Place { token } => {
                let token = mem_token(&token)?;
                match self.rt.import_on_exporter_device(&token) {
                    Ok(imp) => {
                        let device = imp.device().0;
                        let id = self.keep(Obj::Import(imp));
                        value(Some((id, device)))
                    }
                    Err(devipc::Error::DeviceNotVisible { .. }) => value(None::<(u64, u32)>),
                    Err(e) => Err(d(e)),
                }
            }
            FacadeCommand::Drop { id } => {
                self.objects
                    .remove(&id)
                    .ok_or_else(|| Failure::harness(format!("no object {id}")))?;
                done()
            }
            FacadeCommand::LiveImports => value(self.rt.live_imports()),
            FacadeCommand::Calls { api } => {
                if !counting::active() {
                    return Err(Failure::harness("this peer does not count vendor calls"));
                }
                value(counting::calls(&api))
            }
            FacadeCommand::SignalCreate { device } => {
                let s = self.rt.create_signal(DeviceId(device)).map_err(d)?;
                value(self.keep(Obj::Signal(s)))
            }
            FacadeCommand::SignalExport { id, opts } => {
                value(self.signal(id)?.export(opts).map_err(d)?.to_text())
            }
            FacadeCommand::SignalGrant { id, token, peer } => {
                let token = signal_token(&token)?;
                self.signal(id)?
                    .grant(&token, &[ProcessId(peer)])
                    .map_err(d)?;
                done()
            }
            FacadeCommand::SignalImport { token, device } => {
                let token = signal_token(&token)?;
                let s = self.rt.import_signal(&token, DeviceId(device)).map_err(d)?;
                value(self.keep(Obj::Signal(s)))
            }
            FacadeCommand::Notify { id } => {
                self.signal(id)?.notify().map_err(d)?;
                done()
            }
            FacadeCommand::Wait { id, ms } => {
                self.signal(id)?
                    .wait(Some(Duration::from_millis(ms)))
                    .map_err(d)?;
                done()
            }
            FacadeCommand::ExternalAlloc { device, size } => {
                value(vendor_malloc(self.rt.backend(), device, size)?)
            }
            FacadeCommand::ExternalFree { device, ptr } => {
                vendor_free(self.rt.backend(), device, ptr)?;
                done()
            }
            FacadeCommand::ExternalClose { device, ptr } => {
                self.rt
                    .close_external(DeviceId(device), DevicePtr(ptr))
                    .map_err(d)?;
                done()
            }
            FacadeCommand::ExternalWrite { ptr, bytes } => {
                // SAFETY: the conformance driver passes pointers into blocks this shell's
                // `ExternalAlloc` returned and has not freed (a rule that breaks this on
                // purpose runs on the emulator, which checks every copy).
                unsafe { self.rt.backend().write(DevicePtr(ptr), &bytes) }.map_err(d)?;
                done()
            }
            FacadeCommand::ExternalRead { ptr, len } => {
                let mut buf = vec![0u8; len];
                // SAFETY: as for `ExternalWrite`.
                unsafe { self.rt.backend().read(DevicePtr(ptr), &mut buf) }.map_err(d)?;
                value(hex(&buf))
            }
            FacadeCommand::ExternalExport {
                device,
                ptr,
                len,
                opts,
            } => {
                let token = self
                    .rt
                    .export_external(DeviceId(device), DevicePtr(ptr), len, opts)
                    .map_err(d)?;
                value(token.to_text())
            }
        }
    }
}

/// The typed client of a facade shell (in practice a peer).
#[derive(Debug)]
pub struct Facade<E>(pub E);

/// A facade shell in a peer process.
pub type FacadePeer = Facade<Remote<FacadeCommand>>;

impl<E: Exec<FacadeCommand>> Facade<E> {
    /// `Runtime::process_id`.
    pub fn pid(&mut self) -> Result<ProcessId, Failure> {
        Ok(ProcessId(self.0.ask(FacadeCommand::Pid)?))
    }

    /// `Runtime::allocate` (or `allocate_with` the run's mechanism on an allocation
    /// variant, see [`FacadeShell::new`]): the buffer's id.
    pub fn alloc(&mut self, device: u32, size: usize) -> Result<u64, Failure> {
        self.0.ask(FacadeCommand::Alloc { device, size })
    }

    /// `write` on a buffer or import.
    pub fn write(&mut self, id: u64, offset: usize, bytes: &[u8]) -> Result<(), Failure> {
        self.0.ask(FacadeCommand::Write {
            id,
            offset,
            bytes: bytes.to_vec(),
        })
    }

    /// `read` on a buffer or import.
    pub fn read(&mut self, id: u64, offset: usize, len: usize) -> Result<Vec<u8>, Failure> {
        unhex(
            &self
                .0
                .ask::<String>(FacadeCommand::Read { id, offset, len })?,
        )
    }

    /// `SharedBuffer::export_range`: the token.
    pub fn export(
        &mut self,
        id: u64,
        start: usize,
        end: usize,
        opts: ExportOptions,
    ) -> Result<MemToken, Failure> {
        let text: String = self.0.ask(FacadeCommand::Export {
            id,
            start,
            end,
            opts,
        })?;
        mem_token(&text)
    }

    /// `Runtime::grant` of one peer.
    pub fn grant(&mut self, token: &MemToken, peer: ProcessId) -> Result<(), Failure> {
        self.0.ask(FacadeCommand::Grant {
            token: token.to_text(),
            peer: peer.0,
        })
    }

    /// `Runtime::import`: (id, whether it is a local view).
    pub fn import(&mut self, token: &MemToken, device: u32) -> Result<(u64, bool), Failure> {
        self.0.ask(FacadeCommand::Import {
            token: token.to_text(),
            device,
        })
    }

    /// `Runtime::import_on_exporter_device`: `Some((id, device))`, or `None` when the
    /// exporter's device is not visible to the peer.
    pub fn place(&mut self, token: &MemToken) -> Result<Option<(u64, u32)>, Failure> {
        self.0.ask(FacadeCommand::Place {
            token: token.to_text(),
        })
    }

    /// Drops an object.
    pub fn drop_obj(&mut self, id: u64) -> Result<(), Failure> {
        self.0.ask(FacadeCommand::Drop { id })
    }

    /// `Runtime::live_imports`.
    pub fn live_imports(&mut self) -> Result<usize, Failure> {
        self.0.ask(FacadeCommand::LiveImports)
    }

    /// Vendor calls of `api` so far (counting peers only).
    pub fn calls(&mut self, api: &str) -> Result<u64, Failure> {
        self.0.ask(FacadeCommand::Calls {
            api: api.to_owned(),
        })
    }

    /// `Runtime::create_signal`.
    pub fn signal_create(&mut self, device: u32) -> Result<u64, Failure> {
        self.0.ask(FacadeCommand::SignalCreate { device })
    }

    /// `Signal::export`.
    pub fn signal_export(&mut self, id: u64, opts: ExportOptions) -> Result<SignalToken, Failure> {
        let text: String = self.0.ask(FacadeCommand::SignalExport { id, opts })?;
        signal_token(&text)
    }

    /// `Signal::grant` of one peer.
    pub fn signal_grant(
        &mut self,
        id: u64,
        token: &SignalToken,
        peer: ProcessId,
    ) -> Result<(), Failure> {
        self.0.ask(FacadeCommand::SignalGrant {
            id,
            token: token.to_text(),
            peer: peer.0,
        })
    }

    /// `Runtime::import_signal`.
    pub fn signal_import(&mut self, token: &SignalToken, device: u32) -> Result<u64, Failure> {
        self.0.ask(FacadeCommand::SignalImport {
            token: token.to_text(),
            device,
        })
    }

    /// `Signal::notify`.
    pub fn notify(&mut self, id: u64) -> Result<(), Failure> {
        self.0.ask(FacadeCommand::Notify { id })
    }

    /// `Signal::wait` with a timeout.
    pub fn wait(&mut self, id: u64, timeout: Duration) -> Result<(), Failure> {
        self.0.ask(wait_command(id, timeout))
    }

    /// Vendor-allocated memory (`aclrtMalloc` / `hipMalloc`): its address.
    pub fn external_alloc(&mut self, device: u32, size: usize) -> Result<u64, Failure> {
        self.0.ask(FacadeCommand::ExternalAlloc { device, size })
    }

    /// Frees memory from [`Facade::external_alloc`].
    pub fn external_free(&mut self, device: u32, ptr: u64) -> Result<(), Failure> {
        self.0.ask(FacadeCommand::ExternalFree { device, ptr })
    }

    /// `Runtime::close_external` alone (without freeing).
    pub fn external_close(&mut self, device: u32, ptr: u64) -> Result<(), Failure> {
        self.0.ask(FacadeCommand::ExternalClose { device, ptr })
    }

    /// Backend `write` to a raw address.
    pub fn external_write(&mut self, ptr: u64, bytes: &[u8]) -> Result<(), Failure> {
        self.0.ask(FacadeCommand::ExternalWrite {
            ptr,
            bytes: bytes.to_vec(),
        })
    }

    /// Backend `read` from a raw address.
    pub fn external_read(&mut self, ptr: u64, len: usize) -> Result<Vec<u8>, Failure> {
        unhex(
            &self
                .0
                .ask::<String>(FacadeCommand::ExternalRead { ptr, len })?,
        )
    }

    /// `Runtime::export_external`.
    pub fn external_export(
        &mut self,
        device: u32,
        ptr: u64,
        len: usize,
        opts: ExportOptions,
    ) -> Result<MemToken, Failure> {
        let text: String = self.0.ask(FacadeCommand::ExternalExport {
            device,
            ptr,
            len,
            opts,
        })?;
        mem_token(&text)
    }
}

/// [`FacadeCommand::Wait`] for `timeout` (whole milliseconds).
fn wait_command(id: u64, timeout: Duration) -> FacadeCommand {
    FacadeCommand::Wait {
        id,
        ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
    }
}

impl FacadePeer {
    /// Starts `wait` in the peer without waiting for it to return.
    pub fn wait_start(&mut self, id: u64, timeout: Duration) -> Result<(), Failure> {
        self.0.send(Request::Run(wait_command(id, timeout)))
    }

    /// Collects the result of [`Facade::wait_start`].
    pub fn wait_end(&mut self) -> Result<(), Failure> {
        answer(self.0.reply())
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
