//! Framework memory: blocks a framework allocated itself (`hipMalloc`, or VMM memory such
//! as PyTorch's expandable segments), shared with `export_external` and ended with
//! `close_external` (the `DeviceIpc` methods delegate here), and `framework_malloc` /
//! `framework_free`, which make such a block without a framework.
//!
//! The framework owns the memory, so devipc cannot defer its free: each exported block
//! gets a lease its importers hold, `close_external` is refused while one is held, and
//! ends the block's tokens. The exports are the process's, not one backend's
//! ([`EXTERNAL`]): `close_external` and `framework_free` through any backend of the same
//! runtime see (and wait for) an export made through another one. devipc's own buffers are never exported this way
//! (`devipc_core::own_memory`): their free waits only for their own lease.

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use devipc_core::external_exports::ProcessExports;
use devipc_core::own_memory;
use devipc_core::{Allocation, DeviceId, DevicePtr, Error, Mechanism, MemToken, Result};
use devipc_shm::lease::{Lease, held};

use crate::backend::HipBackend;
use crate::device::DeviceScope;
use crate::ipc_mem::handle_tag;
use crate::result;
use crate::vmm::{self, ExportedFd, VmmPayload};

/// What `framework_block_kind` found.
enum BlockKind {
    /// `hipMalloc` memory, with its IPC handle.
    Legacy(devipc_hip_sys::hipIpcMemHandle_t),
    /// VMM memory (`hipMemMap`).
    Vmm,
}

/// The `export_external`s of every HIP backend of this process, per runtime (see
/// [`devipc_core::external_exports`]).
pub(crate) static EXTERNAL: ProcessExports<ExternalExport> = ProcessExports::new();

/// An `export_external` of a framework allocation: the lease its importers hold, which
/// `close_external` ends.
#[derive(Debug, Clone)]
pub(crate) struct ExternalExport {
    pub(crate) size: usize,
    pub(crate) generation: u64,
    pub(crate) lease: Arc<Lease>,
    /// For VMM memory (`hip-vmm-fd`): the fd exported for the block, kept open until
    /// `close_external` (or the backend's drop).
    pub(crate) vmm: Option<Arc<ExportedFd>>,
}

/// Generations of external exports: allocations use their handle's number, framework
/// memory a number of its own (the lease binds whichever the token carries).
pub(crate) static NEXT_EXTERNAL_GENERATION: AtomicU64 =
    AtomicU64::new(NEXT_EXTERNAL_GENERATION_BASE);

/// The first generation of an external export; allocation ids are below it.
pub(crate) const NEXT_EXTERNAL_GENERATION_BASE: u64 = 1 << 62;

impl HipBackend {
    /// `export_external` of `len` bytes at `ptr` on `device` (see the module docs).
    pub(crate) fn export_framework_block(
        &self,
        device: DeviceId,
        ptr: DevicePtr,
        len: usize,
    ) -> Result<MemToken> {
        let dev = self.check_device(device)?;
        ptr.check_external_span(len)?;
        own_memory::check_not_own(ptr, len)?;
        let _scope = DeviceScope::bind(&self.api, dev)?;
        let (base, size) = result::mem_get_address_range(&self.api, ptr.0)?;
        let offset = ptr
            .0
            .checked_sub(base)
            .and_then(|o| usize::try_from(o).ok())
            .ok_or_else(|| {
                Error::invalid_argument("pointer lies outside the allocation the runtime reported")
            })?;
        let range = offset..offset.saturating_add(len);
        Allocation::check_range(&range, size)?;
        // VMM memory (PyTorch's expandable segments, aiter #4174) cannot go through
        // hipIpcGetMemHandle: it is exported whole as an fd, with the offset in the token.
        let handle = match self.framework_block_kind(device, base)? {
            BlockKind::Legacy(handle) => handle,
            BlockKind::Vmm => return self.export_external_vmm(device, base, size, range),
        };
        // The token names `device` (and its identity): it must be the block's own.
        if let Some(on) = result::pointer_device(&self.api, ptr.0)?
            && on != dev
        {
            return Err(Error::invalid_argument(format!(
                "{ptr} is memory of device {on}, not of device {device}: export_external \
                 takes the device the framework allocated the block on"
            )));
        }
        // The framework owns the memory; the lease lets close_external know whether
        // importers still map it, and makes its tokens stop working after it.
        let export = {
            let mut external = self.external.lock();
            match external.get(&(device, base)) {
                Some(e) if e.vmm.is_some() => return Err(stale_external(device, base, "VMM")),
                Some(e) if e.size != size => return Err(reallocated(device, base, e.size, size)),
                Some(_) => external
                    .adopt(&(device, base))
                    .cloned()
                    .expect("just found"),
                None => {
                    let generation = NEXT_EXTERNAL_GENERATION.fetch_add(1, Ordering::Relaxed);
                    let export = ExternalExport {
                        size,
                        generation,
                        lease: held::create_tagged(generation, handle_tag(&handle.to_bytes()))?,
                        vmm: None,
                    };
                    external.insert((device, base), export.clone());
                    export
                }
            }
        };
        let mut payload = handle.to_bytes().to_vec();
        payload.extend_from_slice(export.lease.name());
        self.mem_token(
            Mechanism::HipIpcMem,
            device,
            payload,
            size,
            range,
            export.generation,
        )
    }

    /// Which kind of memory the framework block at `base` on `device` (bound) is, and for
    /// `hipMalloc` memory its IPC handle.
    ///
    /// `hipMemRetainAllocationHandle` of `hipMalloc` memory is reported to crash some ROCm
    /// 7.x releases (audit N7), so it is only ever called on memory that is known not to
    /// be `hipMalloc` memory: where the runtime answers the legacy-IPC attribute (7.12,
    /// RCCL's way) that decides; elsewhere the legacy export is tried first
    /// (`hipIpcGetMemHandle`, which refuses VMM memory), and only memory it refuses is
    /// looked up as VMM memory. When that is not VMM memory either, the legacy refusal is
    /// the error.
    fn framework_block_kind(&self, device: DeviceId, base: u64) -> Result<BlockKind> {
        if let Some(legacy) = vmm::legacy_ipc_capable(&self.api, self.hip_version, base) {
            return if legacy {
                // The runtime just reported `base` as the start of a live allocation.
                self.ipc_handle(device, base).map(BlockKind::Legacy)
            } else {
                Ok(BlockKind::Vmm)
            };
        }
        // The runtime just reported `base` as the start of a live allocation.
        match self.ipc_handle(device, base) {
            Ok(handle) => Ok(BlockKind::Legacy(handle)),
            Err(refused) => {
                // SAFETY: hipIpcGetMemHandle refused `base`, so it is not hipMalloc memory
                // (the precondition of the retain; see `vmm::is_vmm_memory`).
                if unsafe { vmm::is_vmm_memory(&self.api, base) } {
                    Ok(BlockKind::Vmm)
                } else {
                    Err(refused)
                }
            }
        }
    }

    /// `close_external` of the block holding `ptr` on `device` (see the module docs),
    /// whichever runtime of this process exported it.
    pub(crate) fn close_framework_block(&self, device: DeviceId, ptr: DevicePtr) -> Result<()> {
        self.check_device(device)?;
        let mut external = self.external.lock();
        let found = external
            .holding(device, ptr, |e| e.size)
            .map(|(k, e)| (k, e.clone()));
        let Some((key, export)) = found else {
            return Err(Error::invalid_argument(format!(
                "no block exported with export_external holds {ptr} on device {device}"
            )));
        };
        match held::release_if_unheld(&export.lease, || Ok(()))? {
            Some(()) => {
                external.remove(&key);
                Ok(())
            }
            None => Err(Error::invalid_argument(format!(
                "importers still have the block at {ptr} mapped: close_external (after which \
                 the framework may free it) must wait until every importer closed it"
            ))),
        }
    }

    /// `export_external` of VMM memory: the whole allocation at `base` (`size` bytes, as
    /// the runtime reports it) as a `hip-vmm-fd` token for `range`, its fd exported once
    /// per block and kept until `close_external`. Only for memory `framework_block_kind`
    /// found to be VMM memory.
    fn export_external_vmm(
        &self,
        device: DeviceId,
        base: u64,
        size: usize,
        range: Range<usize>,
    ) -> Result<MemToken> {
        let export = {
            let mut external = self.external.lock();
            match external.get(&(device, base)) {
                Some(e) if e.vmm.is_none() => {
                    return Err(stale_external(device, base, "legacy (hipMalloc)"));
                }
                Some(e) if e.size != size => return Err(reallocated(device, base, e.size, size)),
                Some(_) => external
                    .adopt(&(device, base))
                    .cloned()
                    .expect("just found"),
                None => {
                    // SAFETY: only called for memory `framework_block_kind` found to be
                    // VMM memory (not hipMalloc memory).
                    let exported = Arc::new(unsafe {
                        vmm::export_external(&self.api, self.hip_version, base)
                    }?);
                    let generation = NEXT_EXTERNAL_GENERATION.fetch_add(1, Ordering::Relaxed);
                    let export = ExternalExport {
                        size,
                        generation,
                        lease: held::create_tagged(generation, exported.identity.tag())?,
                        vmm: Some(exported),
                    };
                    external.insert((device, base), export.clone());
                    export
                }
            }
        };
        let exported = export.vmm.as_ref().expect("a VMM export");
        let payload = VmmPayload {
            pidfd: true,
            fd: exported.raw(),
            identity: exported.identity,
            lease: *export.lease.name(),
        };
        self.mem_token(
            Mechanism::HipVmmFd,
            device,
            payload.encode(),
            size,
            range,
            export.generation,
        )
    }

    /// `size` bytes on `device` as a framework's own allocator makes them (`hipMalloc`),
    /// outside devipc's bookkeeping: memory for [`DeviceIpc::export_external`], e.g. to
    /// exercise that path without a framework (tests, examples). Free it with
    /// [`HipBackend::framework_free`].
    ///
    /// [`DeviceIpc::export_external`]: devipc_core::DeviceIpc::export_external
    pub fn framework_malloc(&self, device: DeviceId, size: usize) -> Result<DevicePtr> {
        let dev = self.check_device(device)?;
        if size == 0 {
            return Err(Error::invalid_argument("framework_malloc of 0 bytes"));
        }
        let _scope = DeviceScope::bind(&self.api, dev)?;
        result::malloc(&self.api, size).map(DevicePtr)
    }

    /// Frees what [`HipBackend::framework_malloc`] returned (`hipFree`), after ending its
    /// `export_external` exports, made through this or any other backend of this process
    /// on the same runtime (refused with [`Error::InvalidArgument`] while an importer still
    /// maps the block; nothing is freed then).
    ///
    /// # Safety
    /// `ptr` came from `framework_malloc` of this backend on `device`, is not freed yet,
    /// and no view of it remains in this process.
    pub unsafe fn framework_free(&self, device: DeviceId, ptr: DevicePtr) -> Result<()> {
        let dev = self.check_device(device)?;
        // A block still exported would be freed under its importers: its exports end
        // first, which is refused while an importer maps it. Under whatever device the
        // caller exported it (export_external cannot tell a wrong one).
        // Whichever runtime of this process exported it: the exports are the process's
        // (audit N3: a block exported through another Runtime was freed under its
        // importers).
        let exported_on = self.external.lock().devices_of(ptr.0);
        for on in exported_on {
            self.close_framework_block(on, ptr)?;
        }
        let _scope = DeviceScope::bind(&self.api, dev)?;
        // SAFETY: the caller guarantees a live hipMalloc block nothing uses any more, and
        // no export of it is left.
        unsafe { result::free(&self.api, ptr.0) }
    }
}

/// The error for an `export_external` of a block whose earlier export, never closed,
/// recorded another size: the framework freed the block and allocated a new one at the
/// same address (audit N17). The old export's lease and generation must not be reused
/// for it: its importers' holds are the old block's.
fn reallocated(device: DeviceId, base: u64, was: usize, now: usize) -> Error {
    Error::invalid_argument(format!(
        "the block at {base:#x} on device {device} was exported with {was} bytes and now has \
         {now}: it was freed and reallocated without close_external; call close_external \
         for it first"
    ))
}

/// The error for an `export_external` of a block whose earlier export (of the other
/// kind) was never closed: the framework freed and reallocated it under devipc.
fn stale_external(device: DeviceId, base: u64, was: &str) -> Error {
    Error::invalid_argument(format!(
        "the block at {base:#x} on device {device} was exported before as {was} memory and \
         never closed with close_external: the framework freed it while exported; call \
         close_external for it first"
    ))
}
