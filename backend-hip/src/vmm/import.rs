//! The `hip-vmm-fd` import ([`HipBackend::import`] and [`HipBackend::import_fd`] of such
//! a token): the lease held first, the exporter's fd (sent beside the token, or fetched
//! with `pidfd_getfd` only after the lease binding, [`fetch_fd`]), its identity and size
//! checked, then `hipMemImportFromShareableHandle`, reserve, map, set access (see the
//! [parent module](super) for the flow); and the release of such a mapping.

use std::os::fd::OwnedFd;
use std::sync::Arc;

use devipc_core::{
    BackendKind, DeviceId, DeviceIpc, DevicePtr, Error, Mapping, Mechanism, MemToken, Result,
};
use devipc_shm::lease::{Binding, held};
use devipc_shm::process::ProcessIdentity;

use crate::backend::{HipBackend, MappingRecord};
use crate::device::DeviceScope;
use crate::result;
use crate::vmm::{self, FileIdentity, VmmPayload, VmmRange};

impl HipBackend {
    /// `import` (`fd` None: fetched from the exporter with `pidfd_getfd`) and `import_fd`
    /// of a `hip-vmm-fd` token.
    pub(crate) fn import_vmm(
        &self,
        token: &MemToken,
        fd: Option<std::os::fd::OwnedFd>,
        device: DeviceId,
    ) -> Result<Mapping> {
        self.check_token(token.mechanism(), token.emulated(), Mechanism::HipVmmFd)?;
        let dev = self.check_device(device)?;
        // The exporter's device as this process numbers it (a mask may renumber it).
        let home = self.home_device(token.device(), token.physical_device())?;
        if token.origin() == self.origin {
            // Our own lease hold would make our own free wait for us; the facade serves
            // same-process imports from the local allocation (DESIGN 5.1).
            return Err(Error::Unsupported {
                backend: BackendKind::Hip,
                what: "importing a hip-vmm-fd token in the process that exported it (use \
                       the exporter's pointer; the devipc facade does)"
                    .into(),
            });
        }
        self.vmm_fd_support()?;
        let payload = VmmPayload::decode(token.payload())?;
        // Hold the exporter's lease (bound to this generation, the exported fd's identity
        // and the producer) before anything else: a token replayed after the free finds it
        // revoked, and a token whose lease is not its producer's own is refused here,
        // before `pidfd_getfd` copies a descriptor out of the process the token names
        // (audit N15: a forged producer must never make this process take another
        // process's fd, even to close it again).
        let lease = held::hold_for(
            &payload.lease,
            &Binding {
                generation: Some(token.generation()),
                tag: Some(payload.identity.tag()),
                creator: Some(ProcessIdentity {
                    pid: i32::try_from(token.origin().pid.0)
                        .map_err(|_| Error::invalid_token("producer pid out of range"))?,
                    start_time: token.origin().start_time,
                    pid_ns: u32::try_from(token.origin().host.pid_namespace).unwrap_or(0),
                }),
            },
        )?;
        let checked = (|| {
            let fd = match fd {
                Some(fd) => fd,
                None => fetch_fd(token, &payload)?,
            };
            let file = std::fs::File::from(fd);
            // The fd must be the open file the exporter exported for this token: a forged
            // token naming another fd number, or a wrong fd sent beside it, stops here.
            if FileIdentity::of(&file)? != payload.identity {
                return Err(Error::invalid_token(
                    "the file descriptor is not the one exported for this token (another \
                     object, or a forged token)",
                ));
            }
            // The view is bounded by the object's real size, the fd's own; never the
            // token's.
            let real = vmm::real_size(&file)?;
            let size = usize::try_from(real)
                .ok()
                .filter(|s| *s > 0)
                .ok_or_else(|| {
                    Error::invalid_token(format!("the exported object is {real} bytes"))
                })?;
            token.range_within(size)?;
            Ok((file, size))
        })();
        let (file, size) = match checked {
            Ok(checked) => checked,
            Err(e) => {
                held::drop_hold(&lease);
                return Err(e);
            }
        };
        let mapped = (|| {
            let _scope = DeviceScope::bind(&self.api, dev)?;
            let r0502 = devipc_hip_sys::mem_allocation_prop_is_r0502(self.hip_version);
            let granularity = vmm::granularity(&self.api, dev, r0502)?;
            let handle = result::mem_import_from_shareable_handle(
                &self.api,
                std::os::fd::AsFd::as_fd(&file),
                devipc_hip_sys::import_takes_fd_by_value(self.hip_version),
            )?;
            // SAFETY: the handle was just imported, owned by the range from here; the
            // dma-buf is `size` bytes (its own size, above).
            // The owner's device gets access too (a framework may copy from a thread bound
            // to it; devipc's own host copies bind `device`, see `bind_owner`).
            unsafe {
                vmm::VmmRange::map_whole(
                    &self.api,
                    device,
                    handle,
                    size,
                    granularity,
                    home.unwrap_or(device),
                )
            }
        })();
        // Only now, after hipMemSetAccess: the runtime imports the dma-buf lazily
        // (rocm-systems #8304), so closing it earlier breaks set-access on some versions.
        drop(file);
        let range = match mapped {
            Ok(range) => Arc::new(range),
            Err(e) => {
                held::drop_hold(&lease);
                return Err(e);
            }
        };
        let base = range.va;
        // Host copies bind the import's device (see `bind_owner`). Unregistered by the
        // release, before the reservation is freed (the address cannot be reused until then).
        self.vmm_imports
            .register(DevicePtr(base), range.size, device);
        let id = self.mappings.insert(MappingRecord {
            device,
            base,
            lease: Some(lease),
            vmm: Some(range),
        });
        Mapping::for_token(id, device, DevicePtr(base), size, token).inspect_err(|_| {
            if let Ok(record) = self.mappings.remove(id) {
                self.undo_import(&record);
            }
        })
    }

    /// The release of a `hip-vmm-fd` mapping already taken out of the table ([`VmmRange::release`]); the
    /// hold on the lease is the caller's to drop (see [`HipBackend::release_mapping`]).
    pub(crate) fn release_vmm_import(
        &self,
        record: &MappingRecord,
        range: &VmmRange,
    ) -> Result<()> {
        // While the reservation is still ours nobody else can be given its address, so
        // forgetting it by address is exact; it comes back if the release fails (the
        // memory may still be mapped, and the record is restored by the caller).
        self.vmm_imports.unregister(DevicePtr(record.base));
        range.release(&self.api).inspect_err(|_| {
            self.vmm_imports
                .register(DevicePtr(record.base), range.size, record.device);
        })
    }
}

/// Calls of [`fetch_fd`] in this process (`HipBackend::fd_fetches`, for tests).
pub(crate) static FD_FETCHES: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(0);

/// The exporter's fd of `token` (payload `p`), fetched with `pidfd_open` + `pidfd_getfd`
/// after checking the pidfd's process is the token's producer (pid and start time). Call
/// it only once the import holds the token's lease (which binds the producer), so a token
/// naming another process never gets as far as copying its fd (audit N15).
fn fetch_fd(token: &MemToken, p: &VmmPayload) -> Result<OwnedFd> {
    use devipc_shm::os::{pidfd_getfd, pidfd_open};
    FD_FETCHES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    if !p.pidfd {
        return Err(Error::invalid_argument(
            "the exporter does not let importers take this token's file descriptor with \
             pidfd_getfd; receive it over the rendezvous socket (ShareServer / \
             Runtime::connect) or a Unix socket of your own, and call import_fd",
        ));
    }
    let origin = token.origin();
    let here = devipc_core::HostIdentity::current();
    if !here.same_pid_namespace(&origin.host) {
        return Err(Error::invalid_argument(
            "the token's exporter runs on another host or in another pid namespace: its \
             pid means nothing here, so pidfd_getfd cannot fetch the fd; send the fd over \
             a Unix socket instead (import_fd)",
        ));
    }
    let pid = i32::try_from(origin.pid.0)
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| Error::invalid_token("producer pid out of range"))?;
    if origin.start_time == 0 {
        return Err(Error::invalid_token(
            "the token does not say when its producer started, so its pid cannot be trusted",
        ));
    }
    let gone = || {
        Error::invalid_argument(format!(
            "the exporter (pid {pid}) is gone: its file descriptor cannot be fetched any more"
        ))
    };
    let pidfd = pidfd_open(pid).map_err(|e| match e.raw_os_error() {
        Some(ESRCH) => gone(),
        _ => Error::io(format!("pidfd_open of the exporter (pid {pid})"), e),
    })?;
    // Checked after opening: the pidfd keeps naming this process even if the pid is
    // reused later, so the identity read now is the one of the process it names.
    let now = ProcessIdentity::of_pid(pid)
        .map_err(|e| Error::io(format!("reading /proc/{pid}/stat"), e))?;
    if now.is_none_or(|p| p.start_time != origin.start_time) {
        return Err(gone());
    }
    pidfd_getfd(&pidfd, p.fd).map_err(|e| match e.raw_os_error() {
        // An Io error keeps the errno (PermissionDenied) for callers that fall back.
        Some(EPERM) => Error::io(
            format!(
                "pidfd_getfd of the exporter's fd {} was refused: it needs ptrace access to \
                 the exporter (pid {pid}): the same user and kernel.yama.ptrace_scope 0, or \
                 an exporter that allowed this process with prctl(PR_SET_PTRACER), or \
                 CAP_SYS_PTRACE; send the fd over the rendezvous socket instead \
                 (ShareServer / Runtime::connect)",
                p.fd
            ),
            e,
        ),
        Some(ESRCH) => gone(),
        Some(EBADF) => Error::invalid_argument(format!(
            "the exporter (pid {pid}) no longer exports this memory: fd {} is closed (freed, \
             or closed with close_external)",
            p.fd
        )),
        _ => Error::io(format!("pidfd_getfd of fd {} of pid {pid}", p.fd), e),
    })
}

// errno values (Linux, every architecture devipc builds for).
const EPERM: i32 = 1;
const ESRCH: i32 = 3;
const EBADF: i32 = 9;
