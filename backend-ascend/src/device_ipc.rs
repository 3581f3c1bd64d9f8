//! `impl DeviceIpc for AscendBackend`: each call's work, calling ACL through the result
//! layer (`result.rs`).
//!
//! How each mechanism works, the records the backend keeps, and the helpers these methods
//! share with the backend's `Drop` (releases) and with each other (dispatch to IPC keys,
//! the wait loop) are in [`vmm`](crate::vmm) (VMM allocations, copies, peer access),
//! [`ipc_key`](crate::ipc_key) (framework memory by IPC key) and
//! [`notify`](crate::notify) (IPC Notify).

use std::ops::Range;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use devipc_ascend_sys::consts::{
    ACL_NOTIFY_DEFAULT, ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT,
    ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION, ACL_RT_NOTIFY_EXPORT_FLAG_DEFAULT,
    ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION, ACL_RT_NOTIFY_IMPORT_FLAG_DEFAULT,
    ACL_RT_NOTIFY_IMPORT_FLAG_ENABLE_PEER_ACCESS, ACL_RT_VMM_EXPORT_FLAG_DEFAULT,
    ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION,
};
use devipc_core::physical::visibility_in_force;
use devipc_core::token::{MemTokenParts, SignalTokenParts};
use devipc_core::{
    Allocation, BackendInfo, BackendKind, DeviceId, DeviceIpc, DevicePtr, Error, ExportOptions,
    Mapping, Mechanism, MemToken, PhysicalDevice, PidValidation, ProcessId, RawStream, Result,
    SignalHandle, SignalToken,
};
use devipc_shm::lease::held;

use crate::backend::{AscendBackend, CopyRoute, DeviceRange, lock};
use crate::device::DeviceScope;
use crate::ipc_key::{ExternalExport, IPC_KEY_PAGE, Key, NEXT_GENERATION, key_payload};
use crate::notify::SignalRecord;
use crate::record::{self, ExportRecord, Object};
use crate::result;
use crate::result::optional;
use crate::rollback::{Rollback, Undo};
use crate::staging::Transfer;
use crate::vmm::{
    AllocRecord, MappingRecord, Shareable, Teardown, VmmObjects, physical_prop, pid_args,
    vmm_payload,
};

impl DeviceIpc for AscendBackend {
    fn info(&self) -> &BackendInfo {
        &self.info
    }

    fn device_count(&self) -> Result<u32> {
        Ok(self.device_count)
    }

    /// `aclrtDeviceGetBareTgid`, read once (see [`AscendBackend`]); the tokens' origin
    /// reads the same value.
    fn process_id(&self) -> Result<ProcessId> {
        self.bare_tgid()
    }

    /// The physical chip id and the UUID, where the runtime has the calls (see
    /// `AscendBackend::query_physical`).
    fn physical_device(&self, device: DeviceId) -> Result<PhysicalDevice> {
        self.physical
            .get_or_query(device, || self.query_physical(device))
    }

    fn enable_peer_access(&self, device: DeviceId, peer: DeviceId) -> Result<()> {
        let dev = self.check_device(device)?;
        let peer_dev = self.check_device(peer)?;
        if device == peer || lock(&self.peers_enabled).contains(&(device, peer)) {
            return Ok(());
        }
        let _scope = DeviceScope::bind(&self.api, dev)?;
        result::device_enable_peer_access(&self.api, peer_dev)?;
        lock(&self.peers_enabled).push((device, peer));
        Ok(())
    }

    fn allocate(&self, device: DeviceId, size: usize) -> Result<Allocation> {
        let dev = self.check_device(device)?;
        if size == 0 {
            return Err(Error::invalid_argument("cannot allocate 0 bytes"));
        }
        let _scope = DeviceScope::bind(&self.api, dev)?;
        let mut prop = physical_prop(device.0);
        let granularity = self.granularity(&mut prop)?;
        let size = size.checked_next_multiple_of(granularity).ok_or_else(|| {
            Error::invalid_argument(format!(
                "{size} bytes rounded up to the granularity {granularity} overflow"
            ))
        })?;
        let mut rollback = Rollback::new(&self.api);
        let phys = result::malloc_physical(&self.api, size, &prop)?;
        rollback.push(Undo::FreePhysical(phys));
        // SAFETY: `phys` was just allocated with `size` bytes and is not mapped.
        let va = unsafe { self.reserve_and_map(&mut rollback, phys, size, device) }?;
        rollback.commit();
        let record = AllocRecord {
            vmm: VmmObjects {
                device,
                phys,
                va,
                size,
                stage: Teardown::Mapped,
            },
            shared: None,
        };
        let id = self.allocations.insert(record);
        devipc_core::own_memory::register(DevicePtr(va), size, device);
        self.add_range(
            va,
            DeviceRange {
                end: va + size as u64,
                device,
                route: CopyRoute::Direct,
            },
        );
        Ok(Allocation {
            id,
            device,
            ptr: DevicePtr(va),
            size,
        })
    }

    fn free(&self, alloc: Allocation) -> Result<()> {
        self.allocation(&alloc)?;
        let mut record = self.allocations.remove(alloc.id)?;
        self.release_allocation(&mut record).inspect_err(|_| {
            self.allocations.restore(alloc.id, record);
        })
    }

    fn export(
        &self,
        alloc: &Allocation,
        range: Range<usize>,
        opts: ExportOptions,
    ) -> Result<MemToken> {
        let record = self.allocation(alloc)?;
        Allocation::check_range(&range, record.vmm.size)?;
        optional!(self.api, aclrtMemExportToShareableHandle)?;
        let _exporting = lock(&self.export_lock);
        // Re-read under the lock: another thread may have exported meanwhile.
        let shared = self.allocations.get(alloc.id)?.shared;
        let shared = match shared {
            Some(s) if s.validation == opts.validation => s,
            Some(s) => {
                return Err(Error::invalid_argument(format!(
                    "allocation {} was first exported with PID validation {:?}; ACL allows one \
                     shareable handle per physical allocation, so a later export cannot ask for \
                     {:?}: allocate separate memory for it",
                    alloc.id, s.validation, opts.validation
                )));
            }
            None => {
                let flags = match opts.validation {
                    PidValidation::Trustlist => ACL_RT_VMM_EXPORT_FLAG_DEFAULT,
                    PidValidation::AnyProcess => ACL_RT_VMM_EXPORT_FLAG_DISABLE_PID_VALIDATION,
                };
                let _scope = DeviceScope::bind(&self.api, record.vmm.device.as_c_int()?)?;
                // SAFETY: the physical handle is live (its record is in the table and the
                // export lock is held).
                let handle = unsafe {
                    result::mem_export_to_shareable_handle(&self.api, record.vmm.phys, flags)
                }?;
                let shared = Shareable {
                    handle,
                    validation: opts.validation,
                    generation: alloc.id.get(),
                    published: false,
                };
                self.allocations
                    .with(alloc.id, |r| r.shared = Some(shared))?;
                shared
            }
        };
        if !shared.published {
            // Under the export lock, so a concurrent free (which withdraws) cannot
            // interleave with the table update below.
            let mine =
                ExportRecord::mine(shared.generation, record.vmm.size, record.vmm.device, None)?;
            record::publish(Object::Vmm(shared.handle, self.origin()?.into()), &mine)?;
            let marked = self.allocations.with(alloc.id, |r| {
                if let Some(s) = r.shared.as_mut() {
                    s.published = true;
                }
            });
            if marked.is_err() {
                // Freed meanwhile by another thread: leave no record of it behind.
                record::withdraw(
                    Object::Vmm(shared.handle, self.origin()?.into()),
                    shared.generation,
                );
            }
            marked?;
        }
        let handle = shared.handle;
        MemToken::new(MemTokenParts {
            mechanism: Mechanism::AscendVmm,
            emulated: self.info.source.is_emulated(),
            device: record.vmm.device,
            physical: self.token_physical(record.vmm.device),
            origin: self.origin()?,
            generation: shared.generation,
            object_size: record.vmm.size as u64,
            offset: range.start as u64,
            len: (range.end - range.start) as u64,
            payload: handle.to_le_bytes().to_vec(),
        })
    }

    fn export_external(
        &self,
        device: DeviceId,
        ptr: DevicePtr,
        len: usize,
        opts: ExportOptions,
    ) -> Result<MemToken> {
        let dev = self.check_device(device)?;
        ptr.check_external_span(len)?;
        devipc_core::own_memory::check_not_own(ptr, len)?;
        optional!(self.api, aclrtIpcMemGetExportKey)?;
        let _scope = DeviceScope::bind(&self.api, dev)?;
        let (base, size) = self.block_of(device, ptr, len)?;
        if size == 0 {
            return Err(Error::invalid_argument(format!(
                "the block holding {ptr} is smaller than a page ({IPC_KEY_PAGE} bytes): the \
                 runtime exports only page-table aligned ranges by IPC key; allocate at least \
                 a page"
            )));
        }
        let offset = ptr
            .0
            .checked_sub(base)
            .and_then(|o| usize::try_from(o).ok())
            .ok_or_else(|| {
                Error::invalid_argument("pointer lies outside the block the runtime reported")
            })?;
        let range = offset..offset.saturating_add(len);
        devipc_core::Allocation::check_range(&range, size)?;
        let mut external = self.external.lock();
        let export = match external.get(&(device, base)) {
            Some(e) if e.size != size => {
                return Err(Error::invalid_argument(format!(
                    "the block at {base:#x} on device {device} was exported with {} bytes and \
                     now has {size}: it was freed and reallocated without close_external",
                    e.size
                )));
            }
            Some(e) if e.validation != opts.validation => {
                return Err(Error::invalid_argument(format!(
                    "the block at {base:#x} was first exported with PID validation {:?}; its \
                     one key cannot also be exported with {:?}",
                    e.validation, opts.validation
                )));
            }
            Some(_) => *external.adopt(&(device, base)).expect("just found"),
            None => {
                let flags = match opts.validation {
                    PidValidation::Trustlist => ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT,
                    PidValidation::AnyProcess => ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION,
                };
                // SAFETY: base/size name an `aclrtMalloc` block of this process holding
                // `ptr` (page-aligned): the one the runtime reported, or on a runtime that
                // cannot report blocks one `framework_malloc` made and has not freed
                // (`block_of`). A key without a
                // NUL is refused there: the runtime never gets an unterminated buffer back,
                // not even to close it.
                let key = unsafe { result::ipc_mem_get_export_key(&self.api, base, size, flags) }?;
                let lease = match held::create() {
                    Ok(lease) => lease,
                    Err(e) => {
                        // Never leave a key devipc cannot account for.
                        let _ = Undo::IpcClose(key).run(&self.api);
                        return Err(e);
                    }
                };
                let generation = NEXT_GENERATION.fetch_add(1, Ordering::Relaxed);
                let published = ExportRecord::mine(generation, size, device, Some(*lease.name()))
                    .and_then(|r| record::publish(Object::Key(&key, self.origin()?.into()), &r));
                if let Err(e) = published {
                    let _ = Undo::IpcClose(key).run(&self.api);
                    let _ = lease.remove();
                    return Err(e);
                }
                let export = ExternalExport {
                    key,
                    lease: *lease.name(),
                    size,
                    validation: opts.validation,
                    generation,
                };
                external.insert((device, base), export);
                export
            }
        };
        drop(external);
        MemToken::new(MemTokenParts {
            mechanism: Mechanism::AscendIpcKey,
            emulated: self.info.source.is_emulated(),
            device,
            physical: self.token_physical(device),
            origin: self.origin()?,
            generation: export.generation,
            object_size: size as u64,
            offset: range.start as u64,
            len: len as u64,
            payload: [&export.key[..], &export.lease[..]].concat(),
        })
    }

    fn close_external(&self, device: DeviceId, ptr: DevicePtr) -> Result<()> {
        // The inherent method is the public, documented entry point (see external.rs).
        AscendBackend::close_external(self, device, ptr)
    }

    fn grant(&self, token: &MemToken, peers: &[ProcessId]) -> Result<()> {
        self.check_token(
            token.mechanism(),
            token.emulated(),
            &[Mechanism::AscendVmm, Mechanism::AscendIpcKey],
        )?;
        let dev = self.check_device(token.device())?;
        let mut pids = pid_args(peers)?;
        if token.mechanism() == Mechanism::AscendIpcKey {
            return self.grant_key(token, dev, &mut pids);
        }
        let handle = vmm_payload(token)?;
        optional!(self.api, aclrtMemSetPidToShareableHandle)?;
        // Only this backend's live export may be granted: the shareable handle is passed
        // to the runtime, which must never see a freed one (nor one whose value a later
        // allocation reuses). The pin keeps a `free` on another thread from releasing it
        // meanwhile.
        let not_ours = || {
            Error::invalid_argument(
                "only the process that exported memory can grant it, and this backend did not \
                 export this token's allocation (or freed it)",
            )
        };
        if token.origin() != self.origin()? {
            return Err(not_ours());
        }
        let (_, record) = self
            .allocations
            .pin_raw(token.generation())
            .map_err(|_| not_ours())?;
        if record.shared.map(|s| s.handle) != Some(handle) {
            return Err(not_ours());
        }
        // The runtime rejects an empty list (pidNum must be > 0); granting nobody is a no-op.
        if pids.is_empty() {
            return Ok(());
        }
        let _scope = DeviceScope::bind(&self.api, dev)?;
        result::mem_set_pid_to_shareable_handle(&self.api, handle, &mut pids)
    }

    fn import(&self, token: &MemToken, device: DeviceId) -> Result<Mapping> {
        self.check_token(
            token.mechanism(),
            token.emulated(),
            &[Mechanism::AscendVmm, Mechanism::AscendIpcKey],
        )?;
        self.check_device(device)?;
        // The exporter's device as this process numbers it (a mask may renumber it).
        let home = self.home_device(token.device(), token.physical_device())?;
        if token.mechanism() == Mechanism::AscendIpcKey {
            return self.import_key(token, device, home);
        }
        let handle = vmm_payload(token)?;
        // The size is the exporter's record of its physical allocation, never the token's
        // claim (see `record`); the runtime requires the map size to equal the physical
        // size, and reports the mapped extent afterwards.
        let object = Object::Vmm(handle, token.origin().into());
        let recorded = || {
            record::verify(
                object,
                record::read(object)?,
                token.generation(),
                token.device(),
                token.object_size(),
            )
        };
        let size = recorded()?;
        token.range_within(size)?;
        optional!(self.api, aclrtMemImportFromShareableHandle)?;
        // VMM memory of another device needs peer access (api-facts C.5), which cannot be
        // enabled with a device this process does not see.
        let home = home.ok_or_else(|| Error::DeviceNotVisible {
            device: *token.physical_device(),
            visibility: visibility_in_force(BackendKind::Ascend),
        })?;
        if home != device {
            self.enable_peer_access(device, home)?;
        }
        let dev = device.as_c_int()?;
        let _scope = DeviceScope::bind(&self.api, dev)?;
        let mut rollback = Rollback::new(&self.api);
        // The exporter may free the allocation between the record check above and the
        // import: the runtime then refuses the dead handle, which is reported as the
        // replay it is (the record is gone) rather than as a vendor error.
        let phys = result::mem_import_from_shareable_handle(&self.api, handle, dev)
            .map_err(|e| recorded().err().unwrap_or(e))?;
        rollback.push(Undo::FreePhysical(phys));
        // SAFETY: `phys` was just imported and is not mapped; `size` is the exporter's
        // physical size (its record), which the runtime requires the map to cover.
        let va = unsafe { self.reserve_and_map(&mut rollback, phys, size, device) }?;
        let extent = self.runtime_extent(va).map_or(size, |s| s.min(size));
        // Checked before anything is committed, so a refusal releases what was mapped.
        token.range_within(extent)?;
        // Still the export the token names: had the exporter freed it and a new export
        // reused the handle's value meanwhile, the record's generation would differ, and
        // this mapping would be someone else's memory.
        recorded()?;
        rollback.commit();
        let vmm = VmmObjects {
            device,
            phys,
            va,
            size,
            stage: Teardown::Mapped,
        };
        let id = self.mappings.insert(MappingRecord::Vmm(vmm));
        self.add_range(
            va,
            DeviceRange {
                end: va + size as u64,
                device,
                route: CopyRoute::Direct,
            },
        );
        Mapping::for_token(id, device, DevicePtr(va), extent, token).inspect_err(|_| {
            // Not reached (the range was checked above); never leave a mapping behind.
            if let Ok(mut record) = self.mappings.remove(id) {
                let _ = self.release_mapping(&mut record);
            }
        })
    }

    fn close(&self, mapping: Mapping) -> Result<()> {
        let mut record = self.mappings.remove(mapping.id)?;
        self.release_mapping(&mut record).inspect_err(|_| {
            self.mappings.restore(mapping.id, record);
        })
    }

    /// `aclrtMemcpy` host to device. The device bound is the one of the devipc allocation
    /// or mapping holding `dst`; for memory devipc did not map (framework memory) the
    /// thread's current device is used as it is. A `CopyRoute::Staged` mapping is
    /// written through a staging buffer ([`staging`](crate::staging)).
    ///
    /// # Safety
    /// As [`DeviceIpc::write`]: `dst..dst + src.len()` is
    /// device memory the caller may write, mapped until the call returns.
    unsafe fn write(&self, dst: DevicePtr, src: &[u8]) -> Result<()> {
        if src.is_empty() {
            return Ok(());
        }
        let range = self.range_of(dst.0);
        if let Some(r) = range.filter(|r| r.route == CopyRoute::Staged) {
            // SAFETY: the caller's contract, passed on.
            return unsafe { self.staged_copy(r.device, dst.0, Transfer::Write(src)) };
        }
        let _scope = match range {
            Some(r) => Some(DeviceScope::bind(&self.api, r.device.as_c_int()?)?),
            None => None,
        };
        // SAFETY: the caller guarantees `src.len()` writable device bytes at `dst`.
        unsafe { result::memcpy_host_to_device(&self.api, dst.0, src.len(), src) }
    }

    /// `aclrtMemcpy` device to host, binding the device (and staging) as `write` does.
    ///
    /// # Safety
    /// As [`DeviceIpc::read`]: `src..src + dst.len()` is
    /// device memory the caller may read, mapped until the call returns.
    unsafe fn read(&self, src: DevicePtr, dst: &mut [u8]) -> Result<()> {
        if dst.is_empty() {
            return Ok(());
        }
        let range = self.range_of(src.0);
        if let Some(r) = range.filter(|r| r.route == CopyRoute::Staged) {
            // SAFETY: the caller's contract, passed on.
            return unsafe { self.staged_copy(r.device, src.0, Transfer::Read(dst)) };
        }
        let _scope = match range {
            Some(r) => Some(DeviceScope::bind(&self.api, r.device.as_c_int()?)?),
            None => None,
        };
        // SAFETY: the caller guarantees `dst.len()` readable device bytes at `src`.
        unsafe { result::memcpy_device_to_host(&self.api, dst, src.0) }
    }

    fn create_signal(&self, device: DeviceId) -> Result<SignalHandle> {
        let dev = self.check_device(device)?;
        optional!(self.api, aclrtCreateNotify)?;
        optional!(self.api, aclrtDestroyNotify)?;
        let _scope = DeviceScope::bind(&self.api, dev)?;
        // ACL_NOTIFY_DEFAULT: the documented host-usable flag (0).
        let notify = result::create_notify(&self.api, u64::from(ACL_NOTIFY_DEFAULT))?;
        let id = self.signals.insert(SignalRecord {
            device,
            home: device,
            notify,
            created: true,
            exported: None,
            waiter: None,
            busy: false,
        });
        Ok(SignalHandle { id, device })
    }

    fn export_signal(&self, signal: &SignalHandle, opts: ExportOptions) -> Result<SignalToken> {
        let record = self.signal(signal)?;
        if !record.created {
            return Err(Error::invalid_argument(
                "an imported signal cannot be exported again; export the original",
            ));
        }
        optional!(self.api, aclrtNotifyGetExportKey)?;
        let _exporting = lock(&self.export_lock);
        // Re-read under the lock: another thread may have exported meanwhile.
        let key = match self.signal(signal)?.exported {
            Some((key, validation)) if validation == opts.validation => key,
            Some((_, validation)) => {
                return Err(Error::invalid_argument(format!(
                    "signal {} was first exported with PID validation {validation:?}; its one \
                     key cannot also be exported with {:?}",
                    signal.id, opts.validation
                )));
            }
            None => {
                let flags = match opts.validation {
                    PidValidation::Trustlist => ACL_RT_NOTIFY_EXPORT_FLAG_DEFAULT,
                    PidValidation::AnyProcess => ACL_RT_NOTIFY_EXPORT_FLAG_DISABLE_PID_VALIDATION,
                };
                let _scope = DeviceScope::bind(&self.api, record.device.as_c_int()?)?;
                // SAFETY: the notify is live (in the table; the export lock is held) and
                // was created here.
                let key: Key =
                    unsafe { result::notify_get_export_key(&self.api, record.notify, flags) }?;
                self.signals
                    .with(signal.id, |r| r.exported = Some((key, opts.validation)))?;
                key
            }
        };
        SignalToken::new(SignalTokenParts {
            mechanism: Mechanism::AscendNotify,
            emulated: self.info.source.is_emulated(),
            device: record.device,
            physical: self.token_physical(record.device),
            origin: self.origin()?,
            generation: signal.id.get(),
            payload: key.to_vec(),
        })
    }

    /// Sets the trustlist of a notify this process exported. `aclrtNotifySetImportPid`
    /// takes the notify, not the key, so the token must come from this backend: its
    /// generation is the signal's handle id, and the key must match the one exported.
    fn grant_signal(&self, token: &SignalToken, peers: &[ProcessId]) -> Result<()> {
        self.check_token(
            token.mechanism(),
            token.emulated(),
            &[Mechanism::AscendNotify],
        )?;
        self.check_device(token.device())?;
        let key = key_payload(token.payload(), token.mechanism())?;
        let not_ours = || {
            Error::invalid_argument(
                "only the process that exported a signal can grant it, and this backend did \
                 not export this token's notify (or destroyed it)",
            )
        };
        if token.origin() != self.origin()? {
            return Err(not_ours());
        }
        let (_, record) = self
            .signals
            .pin_raw(token.generation())
            .map_err(|_| not_ours())?;
        if record.exported.map(|(k, _)| k) != Some(key) {
            return Err(not_ours());
        }
        let mut pids = pid_args(peers)?;
        optional!(self.api, aclrtNotifySetImportPid)?;
        // The runtime rejects an empty list (num must be > 0); granting nobody is a no-op.
        if pids.is_empty() {
            return Ok(());
        }
        let _scope = DeviceScope::bind(&self.api, record.device.as_c_int()?)?;
        // SAFETY: the notify is live (in the table) and was created here (the export
        // checked above is this backend's).
        unsafe { result::notify_set_import_pid(&self.api, record.notify, &mut pids) }
    }

    fn import_signal(&self, token: &SignalToken, device: DeviceId) -> Result<SignalHandle> {
        self.check_token(
            token.mechanism(),
            token.emulated(),
            &[Mechanism::AscendNotify],
        )?;
        let dev = self.check_device(device)?;
        // The exporter's device as this process numbers it (a mask may renumber it); a
        // device this process does not see is another device than `device`.
        let home = self.home_device(token.device(), token.physical_device())?;
        let key = key_payload(token.payload(), token.mechanism())?;
        optional!(self.api, aclrtNotifyImportByKey)?;
        let flags = if home != Some(device) {
            ACL_RT_NOTIFY_IMPORT_FLAG_ENABLE_PEER_ACCESS
        } else {
            ACL_RT_NOTIFY_IMPORT_FLAG_DEFAULT
        };
        let _scope = DeviceScope::bind(&self.api, dev)?;
        let notify = match result::try_notify_import_by_key(&self.api, &key, flags)? {
            Some(notify) => notify,
            None => {
                // Some runtimes' ACL wrapper rejects the documented peer-access flag (see
                // the module docs): enable peer access the other documented way and
                // import without the flag (which needs the home device to be visible).
                let home = home.ok_or_else(|| Error::DeviceNotVisible {
                    device: *token.physical_device(),
                    visibility: visibility_in_force(BackendKind::Ascend),
                })?;
                self.enable_peer_access(device, home)?;
                result::notify_import_by_key(&self.api, &key, ACL_RT_NOTIFY_IMPORT_FLAG_DEFAULT)?
            }
        };
        let id = self.signals.insert(SignalRecord {
            device,
            // The waits bind the notify's home device; one not visible here is reached
            // through the importing device.
            home: home.unwrap_or(device),
            notify,
            created: false,
            exported: None,
            waiter: None,
            busy: false,
        });
        Ok(SignalHandle { id, device })
    }

    fn notify(&self, signal: &SignalHandle, stream: RawStream) -> Result<()> {
        let record = self.signal(signal)?;
        optional!(self.api, aclrtRecordNotify)?;
        let _scope = DeviceScope::bind(&self.api, record.device.as_c_int()?)?;
        // SAFETY: the notify is live (in the table); the stream is the caller's own, live
        // as `RawStream`'s (unsafe) constructor promised.
        unsafe { result::record_notify(&self.api, record.notify, stream.as_raw()) }
    }

    fn wait(
        &self,
        signal: &SignalHandle,
        stream: RawStream,
        timeout: Option<Duration>,
    ) -> Result<()> {
        let started = Instant::now();
        let record = self.signal(signal)?;
        optional!(self.api, aclrtWaitAndResetNotify)?;
        let what = match timeout {
            Some(limit) => format!("waiting for signal {} (limit {limit:?})", signal.id),
            None => format!("waiting for signal {}", signal.id),
        };
        let timed_out = || Error::timed_out(what.clone(), started);
        let events = self.api.aclrtCreateEventExWithFlag.is_some()
            && self.api.aclrtRecordEvent.is_some()
            && self.api.aclrtQueryEventStatus.is_some()
            && self.api.aclrtDestroyEvent.is_some();
        if !events {
            return self.wait_on_stream(&record, stream, timeout, &timed_out);
        }
        // A deadline beyond what an Instant holds is no deadline.
        let deadline = timeout.and_then(|t| started.checked_add(t));
        let mut waiter = self.claim_waiter(signal, &record, deadline, &timed_out)?;
        let released = || {
            record.release_requested().then(|| Error::UnknownHandle {
                kind: "signal",
                id: signal.id.get(),
            })
        };
        let result = self.wait_until(&record, &mut waiter, deadline, &timed_out, &released);
        let returned = self.signals.with(signal.id, |r| {
            r.waiter = Some(waiter);
            r.busy = false;
        });
        if returned.is_err() {
            // Destroyed meanwhile (a caller bug): the waiter is ours alone to release.
            let _scope = DeviceScope::bind(&self.api, record.home.as_c_int()?)?;
            let _ = self.release_waiter(waiter);
        }
        result
    }

    fn destroy_signal(&self, signal: SignalHandle) -> Result<()> {
        let record = self.signals.remove(signal.id)?;
        self.release_signal(record)
            .inspect_err(|_| self.signals.restore(signal.id, record))
    }
}
