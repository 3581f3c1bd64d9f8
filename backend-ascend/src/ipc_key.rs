//! The `ascend-ipc-key` mechanism: framework memory (`aclrtMalloc`) shared through IPC
//! keys: `export_external`, grant and import of `ascend-ipc-key` tokens (api-facts A.7,
//! C.4).
//!
//! A key names a whole `aclrtMalloc` block, so the exporter resolves the block that holds
//! the pointer (`aclrtMemGetAddressRange`) and exports its base and size, as torch_npu
//! does; the token carries the range's offset within the block and the importer adds it
//! to the base `aclrtIpcMemImportByKey` returns. Without `aclrtMemGetAddressRange` (older
//! runtimes) devipc cannot ask which block holds a pointer, and would hand the runtime's
//! key export an unchecked one (audit N6): only blocks devipc knows, those of
//! `framework_malloc`, are exported there; anything else is `Unsupported`.
//!
//! The exported range must be page-table aligned at both ends (runtime FAQ "page-table
//! alignment of IPC memory sharing": exporting 1024 bytes of `aclrtMalloc(1024)` may fail,
//! 4096 bytes of `aclrtMalloc(4096)` succeed). The block `aclrtMemGetAddressRange` reports
//! includes the padding `aclrtMalloc` adds after the requested size (rounded up to 32, plus
//! 32), so the exporter exports the block's size rounded down to [`IPC_KEY_PAGE`]: the
//! requested bytes of a page-multiple allocation, never the padding, which nobody shares.
//! A range that reaches into the padding, or a block smaller than a page, cannot be
//! exported by key (`InvalidArgument`).
//!
//! Keys are 65 bytes and binary safe: the token carries the runtime's whole buffer, never
//! a copy cut at the first NUL, and devipc hands the runtime that buffer back (after
//! checking that it holds a NUL, so the runtime cannot read past it).
//!
//! # The exporter's key
//!
//! In the exporting process `aclrtIpcMemClose(key)` destroys the key, and the vendor rule
//! is that every importer closes its mapping **before** the exporter closes the key, and
//! that the block is freed only after that. devipc therefore exports each block once and
//! keeps its key (later exports of the same block, any range, reuse it; as for VMM, the
//! validation of the first export is the one that counts) until the owner says the
//! importers are done: [`AscendBackend::close_external`], to be called before the
//! framework frees the block, or the backend's drop.
//!
//! devipc enforces the order instead of leaving it to "exceptions may occur": each
//! exported key comes with a crash-safe lease (devipc-shm) named in the token after the
//! key; importers hold it from before `aclrtIpcMemImportByKey` until after their
//! `aclrtIpcMemClose`, and `close_external` refuses with `InvalidArgument` while a live
//! importer holds it (a killed importer's hold does not count).
//!
//! # Bounds and replays
//!
//! The exporter also writes an export record (`record.rs`) for the key: the key's
//! real size, the generation of its tokens and the lease's name. An import checks the
//! token against it (generation, device, size), holds the lease the *record* names (a
//! token stripped of its lease name still holds it), and bounds the view by the record's
//! size capped by the block `aclrtMemGetAddressRange` reports at the imported address.
//! `close_external` withdraws the record; a dropped backend that has to leave a key open
//! for a live importer retires it, so replayed tokens are refused either way. A key
//! devipc did not export (no record, no lease in the token) is bounded by the runtime's
//! report alone, and refused where the runtime cannot report it.
//!
//! This module does the mechanism's work for the backend's `DeviceIpc` methods
//! (`export_external`, `close_external`, and `grant`/`import` of `ascend-ipc-key` tokens,
//! which `backend.rs` dispatches here), and holds the records of exported keys and of key
//! imports, `framework_malloc`/`framework_free`, and the releases the backend's `close`
//! and `Drop` share.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};

use devipc_ascend_sys::consts::{
    ACL_IPC_KEY_LEN, ACL_RT_IPC_MEM_EXPORT_FLAG_DEFAULT,
    ACL_RT_IPC_MEM_EXPORT_FLAG_DISABLE_PID_VALIDATION, ACL_RT_IPC_MEM_IMPORT_FLAG_DEFAULT,
    ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS,
};
use devipc_ascend_sys::types::ACL_MEM_MALLOC_HUGE_FIRST;
use devipc_core::external_exports::{ProcessExports, RuntimeDomain};
use devipc_core::fork::{PerProcess, PerProcessGuard, forget_inherited};
use devipc_core::protection::{self, Protection};
use devipc_core::token::MemTokenParts;
use devipc_core::{
    BackendKind, DeviceId, DevicePtr, Error, ExportOptions, Mapping, Mechanism, MemToken,
    PidValidation, Result,
};
use devipc_shm::lease::held;
use devipc_shm::word_file::NAME_LEN as LEASE_NAME_LEN;

use crate::backend::{AscendBackend, MappingRecord};
use crate::device::DeviceScope;
use crate::device::{CopyRoute, DeviceRange};
use crate::record::{self, ExportRecord, Object};
use crate::result;
pub(crate) use crate::result::Key;
use crate::result::Undo;
use crate::result::optional;

/// The page-table granule an IPC key range is aligned to: the device's normal page, 4 KiB
/// (huge pages are 2 MiB or 1 GiB; a huge-page block of a page-multiple size is aligned to
/// 4 KiB as well). See the module docs.
pub const IPC_KEY_PAGE: usize = 4096;

/// The blocks `framework_malloc` made and `framework_free` has not freed, per runtime:
/// base to (size, device). What `export_external` may export on a runtime that cannot
/// report blocks (see [`AscendBackend::block_of`]).
static FRAMEWORK_BLOCKS: PerProcess<BTreeMap<RuntimeDomain, FrameworkBlocks>> =
    PerProcess::new(forget_inherited);

/// One runtime's blocks of `framework_malloc`: base to (size, device).
type FrameworkBlocks = BTreeMap<u64, (usize, DeviceId)>;

fn framework_blocks() -> PerProcessGuard<'static, BTreeMap<RuntimeDomain, FrameworkBlocks>> {
    FRAMEWORK_BLOCKS.lock()
}

/// Generations of exported keys: unique in the process, never reused.
static NEXT_GENERATION: AtomicU64 = AtomicU64::new(1);

/// The keys every Ascend backend of this process exported, per runtime (see
/// [`devipc_core::external_exports`]): `close_external` and `framework_free` through any
/// backend of the runtime find (and wait for) a key another one exported.
pub(crate) static EXTERNAL: ProcessExports<ExternalExport> = ProcessExports::new();

/// A key this process exported for a framework block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ExternalExport {
    pub(crate) key: Key,
    /// The lease importers hold while they have the block mapped (see the module docs).
    pub(crate) lease: LeaseName,
    /// The block's size (its base is the map key).
    pub(crate) size: usize,
    pub(crate) validation: PidValidation,
    /// Tells this export from an earlier one of a block at the same address.
    pub(crate) generation: u64,
}

/// Key imports of this process per key, oldest first, with whether devipc released them.
/// `aclrtIpcMemClose` closes a key's *oldest* import (RT-SRC `vaList.front()`), so a
/// release is carried out only once every older import of the key is released too
/// ([`AscendBackend::release_key_mapping`]). Process-wide, like the runtime's list: two
/// `Runtime`s of one process importing one key share it. Per process: a forked child's
/// list starts empty (its parent's imports are not the child's).
static KEY_IMPORTS: PerProcess<HashMap<Key, ImportQueue>> = PerProcess::new(forget_inherited);

/// One key's imports in this process, oldest first, each with whether devipc released it.
type ImportQueue = VecDeque<(KeyMapping, bool)>;

/// What the backend keeps for a [`Mapping`] of an imported key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KeyMapping {
    pub(crate) device: DeviceId,
    pub(crate) key: Key,
    /// The exporter's lease this process holds while the mapping lives, if the token named one.
    pub(crate) lease: Option<LeaseName>,
    /// The block base the import returned.
    pub(crate) base: u64,
}

/// The key of a token payload: exactly 65 bytes holding a NUL (the runtime reads it as a
/// C string).
pub(crate) fn key_payload(payload: &[u8], mechanism: Mechanism) -> Result<Key> {
    let key: Key = payload.try_into().map_err(|_| {
        Error::invalid_token(format!(
            "an {mechanism} payload is {ACL_IPC_KEY_LEN} bytes, not {}",
            payload.len()
        ))
    })?;
    if !key.contains(&0) {
        return Err(Error::invalid_token(format!(
            "the {mechanism} key is not NUL-terminated within its {ACL_IPC_KEY_LEN} bytes"
        )));
    }
    Ok(key)
}

/// The name of a [`devipc_shm::lease::Lease`].
pub(crate) type LeaseName = [u8; LEASE_NAME_LEN];

/// The key and lease name of an `ascend-ipc-key` token: the 65-byte key, then (from
/// devipc's own exporters) the 32-byte name of the exporter's lease.
fn key_token_payload(payload: &[u8], mechanism: Mechanism) -> Result<(Key, Option<LeaseName>)> {
    if payload.len() == ACL_IPC_KEY_LEN + LEASE_NAME_LEN {
        let (key, lease) = payload.split_at(ACL_IPC_KEY_LEN);
        let lease: LeaseName = lease
            .try_into()
            .map_err(|_| Error::invalid_token("bad lease name"))?;
        Ok((key_payload(key, mechanism)?, Some(lease)))
    } else {
        Ok((key_payload(payload, mechanism)?, None))
    }
}

impl AscendBackend {
    /// `size` bytes on `device` as a framework's own allocator makes them (`aclrtMalloc`,
    /// huge pages first, as torch_npu's allocator asks), outside devipc's bookkeeping:
    /// memory for [`DeviceIpc::export_external`], e.g. to exercise that path without a
    /// framework (tests, examples). Free it with [`AscendBackend::framework_free`].
    ///
    /// [`DeviceIpc::export_external`]: devipc_core::DeviceIpc::export_external
    pub fn framework_malloc(&self, device: DeviceId, size: usize) -> Result<DevicePtr> {
        let dev = self.check_device(device)?;
        if size == 0 {
            return Err(Error::invalid_argument("framework_malloc of 0 bytes"));
        }
        let _scope = DeviceScope::bind(&self.api, dev)?;
        let ptr = result::malloc(&self.api, size, ACL_MEM_MALLOC_HUGE_FIRST)?;
        // Known from here: `export_external` can check a pointer into it even where the
        // runtime cannot report blocks (no `aclrtMemGetAddressRange`).
        framework_blocks()
            .entry(self.external.domain().clone())
            .or_default()
            .insert(ptr, (size, device));
        Ok(DevicePtr(ptr))
    }

    /// Frees what [`AscendBackend::framework_malloc`] returned (`aclrtFree`), after closing
    /// its `export_external` key, exported through this or any other backend of this
    /// process on the same runtime (refused with [`Error::InvalidArgument`] while an
    /// importer still maps the block; nothing is freed then).
    ///
    /// # Safety
    /// `ptr` came from `framework_malloc` of this backend on `device`, is not freed yet,
    /// and no view of it remains in this process.
    pub unsafe fn framework_free(&self, device: DeviceId, ptr: DevicePtr) -> Result<()> {
        let dev = self.check_device(device)?;
        // A block still exported would be freed under its importers: its key is closed
        // first, which is refused while an importer maps it. Under whatever device the
        // caller exported it (export_external cannot tell a wrong one).
        // Whichever runtime of this process exported it: the keys are the process's
        // (audit N3: a block exported through another Runtime was freed under its
        // importers).
        let exported_on = self.external.lock().devices_of(ptr.0);
        for on in exported_on {
            self.close_external(on, ptr)?;
        }
        let _scope = DeviceScope::bind(&self.api, dev)?;
        // Forgotten before the free, while the address is still this block's (after it,
        // another thread's allocation may get it), and recorded again if the free fails.
        let known = self.forget_framework_block(ptr.0);
        // SAFETY: the caller guarantees a live aclrtMalloc block nothing uses any more, and
        // no export of it is left.
        unsafe { result::free(&self.api, ptr.0) }.inspect_err(|_| {
            if let Some(block) = known {
                framework_blocks()
                    .entry(self.external.domain().clone())
                    .or_default()
                    .insert(ptr.0, block);
            }
        })
    }

    /// Takes the block at `base` out of the blocks `framework_malloc` made.
    fn forget_framework_block(&self, base: u64) -> Option<(usize, DeviceId)> {
        framework_blocks()
            .get_mut(self.external.domain())
            .and_then(|blocks| blocks.remove(&base))
    }

    /// `export_external`: the key of the `aclrtMalloc` block holding `ptr`
    /// (`aclrtIpcMemGetExportKey`, created by the block's first export and kept until
    /// [`AscendBackend::close_external`]), its lease and export record, and a token for the
    /// `len` bytes at `ptr` (see the module docs).
    pub(crate) fn export_key(
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

    /// The base of the `aclrtMalloc` block holding `len` bytes at `ptr` on `device` and the
    /// size to export: the block's size rounded down to [`IPC_KEY_PAGE`] (see the module
    /// docs). The device must be bound.
    ///
    /// The block is the runtime's report (`aclrtMemGetAddressRange`), never the caller's
    /// word: the base and size go into `aclrtIpcMemGetExportKey`, which must be given an
    /// `aclrtMalloc` block of this process, and `export_external` is a safe API (audit
    /// N6). A runtime without the call can only export blocks devipc knows:
    /// `framework_malloc`'s; anything else is [`Error::Unsupported`], naming the call.
    fn block_of(&self, device: DeviceId, ptr: DevicePtr, len: usize) -> Result<(u64, usize)> {
        if self.api.aclrtMemGetAddressRange.is_some() {
            let (base, size) = result::mem_get_address_range(&self.api, ptr.0)?;
            return Ok((base, size / IPC_KEY_PAGE * IPC_KEY_PAGE));
        }
        let end = ptr.0.saturating_add(len as u64);
        let known = framework_blocks()
            .get(self.external.domain())
            .and_then(|blocks| {
                let (&base, &(size, on)) = blocks.range(..=ptr.0).next_back()?;
                (on == device && end <= base.saturating_add(size as u64)).then_some((base, size))
            });
        match known {
            Some((base, size)) => Ok((base, size / IPC_KEY_PAGE * IPC_KEY_PAGE)),
            None => Err(Error::unsupported(
                BackendKind::Ascend,
                format!(
                    "export_external of {len} bytes at {ptr} on device {device} on this ACL \
                     runtime: it lacks aclrtMemGetAddressRange, so devipc cannot ask which \
                     aclrtMalloc block holds the pointer, and the runtime's key export must \
                     be given one; only blocks of framework_malloc (which devipc knows) can \
                     be exported here (CANN with aclrtMemGetAddressRange lifts this)"
                ),
            )),
        }
    }

    /// Closes the key this process exported (through this or another backend on the same
    /// runtime) for the framework block holding `ptr` on `device` (`aclrtIpcMemClose` in
    /// the exporter), so the framework may free the block.
    ///
    /// Call it only after every importer closed its mapping: the runtime requires
    /// importers to close first. Tokens of the block stop working; a later
    /// `export_external` of the block creates a new key. Fails with
    /// [`Error::InvalidArgument`] when this backend exported no block holding `ptr`.
    pub fn close_external(&self, device: DeviceId, ptr: DevicePtr) -> Result<()> {
        self.check_device(device)?;
        let mut external = self.external.lock();
        let found = external
            .holding(device, ptr, |e| e.size)
            .map(|(k, e)| (k, *e));
        let Some((map_key, export)) = found else {
            return Err(Error::invalid_argument(format!(
                "no block exported with export_external holds {ptr} on device {device}"
            )));
        };
        let lease = held::reopen(&export.lease)?;
        if !protection::enabled(Protection::AscendKeyCloseOrder) {
            // Test only: close the key under the importers, as plain ACL would let us.
            self.release_external(device, &export)?;
            lease
                .remove()
                .map_err(|e| Error::io("removing a lease", e))?;
            external.remove(&map_key);
            return Ok(());
        }
        match held::release_if_unheld(&lease, || self.release_external(device, &export))? {
            Some(()) => {
                external.remove(&map_key);
                Ok(())
            }
            None => Err(Error::invalid_argument(format!(
                "importers still have the block at {ptr} mapped: the runtime requires every \
                 importer to close it (aclrtIpcMemClose) before the exporter closes its key"
            ))),
        }
    }

    /// `aclrtIpcMemClose` of an exported key, then its export record is withdrawn (see
    /// [`record`]). Withdrawing after the close is safe because the caller
    /// holds the lease with no holder left (an import holds it before it maps), and keeps
    /// the record when the close fails, so the key is never open without one.
    fn release_external(&self, device: DeviceId, export: &ExternalExport) -> Result<()> {
        {
            let _scope = DeviceScope::bind(&self.api, device.as_c_int()?)?;
            Undo::IpcClose(export.key).run(&self.api)?;
        }
        // The origin was read when the record was published (it is cached since).
        if let Ok(origin) = self.origin() {
            record::withdraw(Object::Key(&export.key, origin.into()), export.generation);
        }
        Ok(())
    }

    /// Ends an export of framework memory when the backend goes: the key is closed unless
    /// an importer still maps it. Destroying a key under an importer pulls the memory
    /// from under it (RT-DOC 11-07), so then the key stays open, ACL stays initialised
    /// (`aclFinalize` may tear down what the process shares, so the drop skips it), and
    /// the runtime destroys the key when this process exits. Either way a replayed token
    /// of it is refused from now on: the export record is retired (and removed with the
    /// key when it is closed, or swept once this process is gone) and the lease removed.
    pub(crate) fn drop_external(
        &self,
        device: DeviceId,
        base: u64,
        export: &ExternalExport,
    ) -> Result<()> {
        // Retired first: from here on no import starts (one that read the record before
        // finds the lease gone below). The record stays while the key may stay open, so
        // that a token stripped of its lease is refused too; the close withdraws it.
        let origin = self.origin()?;
        crate::record::retire(
            crate::record::Object::Key(&export.key, origin.into()),
            export.generation,
        );
        let lease = match devipc_shm::lease::held::reopen(&export.lease) {
            Ok(lease) => lease,
            // The lease is gone (its file removed by hand): nobody can be counted, so the
            // key is not closed under someone who might map it.
            Err(e) => {
                self.keep_acl_initialized();
                return Err(e);
            }
        };
        let closed = devipc_shm::lease::held::release_if_unheld(&lease, || {
            self.release_external(device, export)
        });
        match closed {
            Ok(Some(())) => Ok(()),
            Ok(None) => {
                self.keep_acl_initialized();
                log::warn!(
                    "devipc-ascend: the IPC key of the block at {base:#x} stays open until \
                     this process exits: an importer still maps it"
                );
                let _ = lease.remove();
                Ok(())
            }
            Err(e) => {
                self.keep_acl_initialized();
                let _ = lease.remove();
                Err(e)
            }
        }
    }

    /// Sets the trustlist of an `ascend-ipc-key` token (`aclrtIpcMemSetImportPid`).
    pub(crate) fn grant_key(&self, token: &MemToken, dev: i32, pids: &mut [i32]) -> Result<()> {
        let (key, _lease) = key_token_payload(token.payload(), token.mechanism())?;
        optional!(self.api, aclrtIpcMemSetImportPid)?;
        // Only a key this backend exported and has not closed: the export table's lock is
        // held across the call, so `close_external` cannot close the key meanwhile.
        let not_ours = || {
            Error::invalid_argument(
                "only the process that exported memory can grant it, and this backend did not \
                 export this token's key (or closed it)",
            )
        };
        if token.origin() != self.origin()? {
            return Err(not_ours());
        }
        let external = self.external.lock();
        let live = external
            .iter()
            .any(|(_, e)| e.key == key && e.generation == token.generation());
        if !live {
            return Err(not_ours());
        }
        // The runtime rejects an empty list (num must be > 0); granting nobody is a no-op.
        if pids.is_empty() {
            return Ok(());
        }
        let _scope = DeviceScope::bind(&self.api, dev)?;
        result::ipc_mem_set_import_pid(&self.api, &key, pids)
    }

    /// Maps an `ascend-ipc-key` token on `device` (`aclrtIpcMemImportByKey`), with the
    /// runtime's peer-access flag when `device` is not the exporter's.
    ///
    /// The view is bounded by the key's real size: the exporter's record of the key when
    /// there is one (devipc exporters always write one; its generation and size must match
    /// the token's, and the lease held is the one it names), capped by the block
    /// `aclrtMemGetAddressRange` reports at the imported address. A key without a record (exported by something other than devipc) is
    /// bounded by that query alone, and refused when the runtime cannot answer it. A token
    /// that names the exporter's lease but whose key has no record is refused before the
    /// runtime is called: the exporter closed the key (replay after close).
    pub(crate) fn import_key(
        &self,
        token: &MemToken,
        device: DeviceId,
        home: Option<DeviceId>,
    ) -> Result<Mapping> {
        // The token's own lease name is ignored: the record's is held.
        let (key, _) = key_token_payload(token.payload(), token.mechanism())?;
        let object = Object::Key(&key, token.origin().into());
        let found = record::read(object)?;
        // Every devipc key token has its exporter's record; without one (a freed or closed
        // key, or a token whose producer was edited so no record is found) nothing would
        // bound the view or hold the lease that makes the exporter's close wait, so the
        // import is refused. The lease held is the one the exporter recorded, whatever the
        // token names.
        let lease = found.as_ref().and_then(|r| r.lease);
        let size = record::verify(
            object,
            found,
            token.generation(),
            token.device(),
            token.object_size(),
        )?;
        token.range_within(size)?;
        let recorded = size;
        optional!(self.api, aclrtIpcMemImportByKey)?;
        // `home`: the exporter's device as this process numbers it; `None` (not visible
        // here) is another device than `device`.
        let cross_device = home != Some(device);
        let flags = if cross_device {
            ACL_RT_IPC_MEM_IMPORT_FLAG_ENABLE_PEER_ACCESS
        } else {
            ACL_RT_IPC_MEM_IMPORT_FLAG_DEFAULT
        };
        let _scope = DeviceScope::bind(&self.api, device.as_c_int()?)?;
        // Hold the exporter's lease before mapping, so its close waits for ours.
        let held_lease = lease.map(|name| held::hold(&name)).transpose()?;
        // The process's import list is locked from before the vendor import until this
        // import is in it: the list's order must be the runtime's (whose close takes the
        // oldest), also when threads import the same key at once, e.g. on two devices.
        let mut imports = KEY_IMPORTS.lock();
        let base = match result::ipc_mem_import_by_key(&self.api, &key, flags) {
            Ok(base) => base,
            Err(e) => {
                drop(imports);
                if let Some(l) = &held_lease {
                    held::drop_hold(l);
                }
                return Err(e);
            }
        };
        let record = KeyMapping {
            device,
            key,
            lease,
            base,
        };
        // Owned at once by the process's import list: `aclrtIpcMemClose` closes the key's
        // *oldest* import here, so even undoing this import must go through the list
        // (a plain close would unmap an older import of the same key). The lease hold is
        // dropped by that release, after the vendor close.
        imports.entry(key).or_default().push_back((record, false));
        drop(imports);
        let undo = |e: Error| {
            if let Err(close) = self.release_key_mapping(&record) {
                log::error!(
                    "devipc-ascend: closing a key import that failed midway failed: {close}"
                );
            }
            e
        };
        let reported = self.runtime_extent(base);
        // The record's size, capped by what the runtime reports where it can.
        let size = reported.map_or(recorded, |q| recorded.min(q));
        let checked = token
            .range_within(size)
            .and_then(|_| DevicePtr(base).offset(size));
        let end = match checked {
            Ok(end) => end.0,
            Err(e) => return Err(undo(e)),
        };
        let id = self.mappings.insert(MappingRecord::Key(record));
        // The vendor allows only asynchronous device-to-device copies of a key import
        // used on another device than the exporter's (RT-DOC 11-07): host copies of it
        // are staged.
        let route = if cross_device {
            CopyRoute::Staged
        } else {
            CopyRoute::Direct
        };
        self.add_range(base, DeviceRange { end, device, route });
        Mapping::for_token(id, device, DevicePtr(base), size, token).map_err(|e| {
            // Not reached (the range was checked above); never leave a mapping behind.
            let _ = self.mappings.remove(id);
            undo(e)
        })
    }

    /// Releases an imported key mapping. `aclrtIpcMemClose` closes the key's *oldest*
    /// import in this process, so the import is only marked released until every older
    /// import of the key is released too; then the released imports are closed oldest
    /// first, each with its lease hold dropped after its close. A close that fails stops
    /// there and is returned: that import stays (marked released, with its hold) and is
    /// closed by a retry or the key's next release.
    pub(crate) fn release_key_mapping(&self, mapping: &KeyMapping) -> Result<()> {
        // Taken out first (no copy may start on a mapping being closed), and put back if
        // the close fails: the caller restores the mapping, which stays usable.
        let range = self.range_at(mapping.base);
        self.remove_range(mapping.base);
        self.release_key_imports(mapping).inspect_err(|_| {
            if let Some(range) = range {
                self.add_range(mapping.base, range);
            }
        })
    }

    /// The queue work of [`AscendBackend::release_key_mapping`].
    fn release_key_imports(&self, mapping: &KeyMapping) -> Result<()> {
        let mut imports = KEY_IMPORTS.lock();
        let imports = &mut *imports;
        let Some(queue) = imports.get_mut(&mapping.key) else {
            return Err(Error::invalid_argument(
                "the key import is not known to this backend",
            ));
        };
        if let Some(entry) = queue
            .iter_mut()
            .find(|(m, released)| m == mapping && !released)
        {
            entry.1 = true;
        }
        while queue.front().is_some_and(|(_, released)| *released) {
            let Some(&(oldest, _)) = queue.front() else {
                break;
            };
            let closed = DeviceScope::bind(&self.api, oldest.device.as_c_int()?)
                .and_then(|_scope| Undo::IpcClose(oldest.key).run(&self.api));
            // On failure the runtime may still map the key here: the import stays in the
            // queue (released, the oldest) and keeps its lease hold, so the exporter's
            // close still waits for it, and the next release of the key, or the caller's
            // retry of this one (its record is restored), closes it (audit N13; HIP keeps
            // its hold the same way).
            closed?;
            queue.pop_front();
            if let Some(lease) = &oldest.lease {
                held::drop_hold_by_name(lease);
            }
        }
        if queue.is_empty() {
            imports.remove(&mapping.key);
        }
        Ok(())
    }
}
