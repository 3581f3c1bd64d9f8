//! The import cache (DESIGN section 5.2): importing the same token twice in one process
//! returns the same mapping, reference counted; the vendor import runs once, and the
//! vendor close runs when the last user drops it.
//!
//! Entries are weak references, so the cache holds exactly the live imports and is
//! bounded by them. The key is the token's [`TokenIdentity`] (vendor handle and producer)
//! plus the importing device; tokens for different ranges of one export share an entry.
//! A token whose generation differs from the cached one names a new object behind a
//! reused handle: the stale entry leaves the cache (its holders keep their mapping) and
//! the token is imported afresh.
//!
//! Imports and closes run under the cache lock, and an import of a handle whose last user
//! is still closing waits for that close: runtimes that allow one import per process
//! (Ascend VMM) never see the second import of one handle on one device before the first
//! close. Importing it on a second device is a second vendor import: Ascend VMM refuses it
//! (a typed vendor error), Ascend IPC keys allow it (the backend closes them in the
//! runtime's order), HIP counts it on the one mapping.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};

use devipc_core::protection::{self, Protection};
use devipc_core::{DeviceId, DeviceIpc, DevicePtr, Mapping, MemToken, Result, TokenIdentity};

use crate::runtime::Runtime;

type Key = (TokenIdentity, DeviceId);

/// Live imports of one runtime.
#[derive(Debug, Default)]
pub(crate) struct ImportCache {
    entries: Mutex<HashMap<Key, Weak<Mapped>>>,
    /// Signalled after every close, for imports waiting on a closing entry.
    closed: Condvar,
}

/// One vendor import, shared by every [`ImportedBuffer`](crate::ImportedBuffer) of it.
#[derive(Debug)]
pub(crate) struct Mapped {
    rt: Runtime,
    key: Key,
    mapping: Option<Mapping>,
    /// Address of the vendor object's first byte in this process.
    object_base: DevicePtr,
    generation: u64,
}

impl Mapped {
    /// Where `token`'s range starts in this mapping.
    pub(crate) fn ptr_for(&self, token: &MemToken) -> Result<DevicePtr> {
        self.object_base.offset(offset_of(token)?)
    }
}

fn offset_of(token: &MemToken) -> Result<usize> {
    usize::try_from(token.offset())
        .map_err(|_| devipc_core::Error::invalid_token("offset does not fit this platform"))
}

impl ImportCache {
    fn lock(&self) -> MutexGuard<'_, HashMap<Key, Weak<Mapped>>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Number of live imports.
    pub(crate) fn len(&self) -> usize {
        self.lock()
            .values()
            .filter(|w| w.strong_count() > 0)
            .count()
    }

    /// The live import of `token` on `device`, importing it if there is none.
    pub(crate) fn get_or_import(
        &self,
        rt: &Runtime,
        token: &MemToken,
        device: DeviceId,
    ) -> Result<Arc<Mapped>> {
        let key = (token.identity(), device);
        let mut map = self.lock();
        while let Some(weak) = map.get(&key) {
            match weak.upgrade() {
                Some(live) if live.generation == token.generation() => {
                    if !protection::enabled(Protection::ImportCacheRefcount) {
                        // Test only: a second owner of the same vendor import, which
                        // closes it when dropped although the first still uses it.
                        return Ok(Arc::new(Mapped {
                            rt: rt.clone(),
                            key: key.clone(),
                            mapping: live.mapping.clone(),
                            object_base: live.object_base,
                            generation: live.generation,
                        }));
                    }
                    return Ok(live);
                }
                Some(_stale) => {
                    map.remove(&key);
                    break;
                }
                // Its last user is closing it right now: wait for the close.
                None => map = self.closed.wait(map).unwrap_or_else(|p| p.into_inner()),
            }
        }
        let mapping = rt.inner.backend.import(token, device)?;
        let object_base = DevicePtr(mapping.ptr.0.wrapping_sub(token.offset()));
        let mapped = Arc::new(Mapped {
            rt: rt.clone(),
            key: key.clone(),
            mapping: Some(mapping),
            object_base,
            generation: token.generation(),
        });
        map.insert(key, Arc::downgrade(&mapped));
        Ok(mapped)
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        let cache = &self.rt.inner.imports;
        let mut map = cache.lock();
        if map
            .get(&self.key)
            .is_some_and(|w| std::ptr::eq(w.as_ptr(), self))
        {
            map.remove(&self.key);
        }
        if let Some(mapping) = self.mapping.take()
            && let Err(e) = self.rt.inner.backend.close(mapping)
        {
            eprintln!("devipc: closing an imported mapping failed: {e}");
        }
        drop(map);
        cache.closed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use devipc_core::token::MemTokenParts;
    use devipc_core::{
        BackendKind, Error, ExportOptions, HostIdentity, Mechanism, ProcessId, TokenOrigin,
    };

    use super::*;
    use crate::Backend;
    use crate::probe::ProbeBackend;

    fn probe_runtime() -> Runtime {
        Runtime::from_backend(Backend::from(ProbeBackend::new(BackendKind::Hip)))
    }

    fn probe(rt: &Runtime) -> &ProbeBackend {
        match rt.backend() {
            Backend::Probe(p) => p,
            #[allow(unreachable_patterns, reason = "other variants exist per feature")]
            _ => unreachable!("probe runtime"),
        }
    }

    /// A token from another process: `generation` and `offset`/`len` vary per test.
    fn remote(generation: u64, offset: u64, len: u64) -> MemToken {
        MemToken::new(MemTokenParts {
            mechanism: Mechanism::HipIpcMem,
            emulated: true,
            device: DeviceId(0),
            origin: TokenOrigin {
                pid: ProcessId(std::process::id() + 1),
                start_time: 1,
                host: HostIdentity::current(),
            },
            generation,
            object_size: 4096,
            offset,
            len,
            payload: vec![9; 64],
        })
        .unwrap()
    }

    #[test]
    fn a_second_import_shares_the_mapping_and_the_last_drop_closes_it() {
        let rt = probe_runtime();
        let a = rt.import(&remote(1, 0, 4096), DeviceId(0)).unwrap();
        let b = rt.import(&remote(1, 512, 100), DeviceId(0)).unwrap();
        assert_eq!(
            probe(&rt).count("import"),
            1,
            "the second import must not reach the vendor"
        );
        assert_eq!(b.ptr().0, a.ptr().0 + 512);
        assert_eq!((a.len(), b.len()), (4096, 100));
        assert_eq!(rt.live_imports(), 1);
        drop(a);
        assert_eq!(probe(&rt).count("close"), 0, "b still uses the mapping");
        drop(b);
        assert_eq!(probe(&rt).count("close"), 1);
        assert_eq!(rt.live_imports(), 0);
        let _c = rt.import(&remote(1, 0, 8), DeviceId(0)).unwrap();
        assert_eq!(
            probe(&rt).count("import"),
            2,
            "after the close, a new import reaches the vendor"
        );
    }

    #[test]
    fn another_device_is_another_import() {
        let rt = probe_runtime();
        let _a = rt.import(&remote(1, 0, 64), DeviceId(0)).unwrap();
        let _b = rt.import(&remote(1, 0, 64), DeviceId(1)).unwrap();
        assert_eq!(probe(&rt).count("import"), 2);
        assert_eq!(rt.live_imports(), 2);
    }

    #[test]
    fn a_new_generation_behind_the_same_handle_is_not_served_from_the_cache() {
        let rt = probe_runtime();
        let old = rt.import(&remote(1, 0, 64), DeviceId(0)).unwrap();
        let new = rt.import(&remote(2, 0, 64), DeviceId(0)).unwrap();
        assert_eq!(probe(&rt).count("import"), 2);
        drop(old);
        assert_eq!(probe(&rt).count("close"), 1);
        // The stale entry's drop must not evict the new one.
        let _again = rt.import(&remote(2, 0, 64), DeviceId(0)).unwrap();
        assert_eq!(probe(&rt).count("import"), 2);
        drop(new);
    }

    #[test]
    fn a_same_process_token_is_served_locally_without_a_vendor_import() {
        let rt = probe_runtime();
        let buf = rt.allocate(DeviceId(0), 64).unwrap();
        let token = buf.export(ExportOptions::default()).unwrap();
        let view = rt.import(&token, DeviceId(0)).unwrap();
        assert!(view.is_local());
        assert_eq!(view.ptr(), buf.ptr());
        assert_eq!(probe(&rt).count("import"), 0);
        // The view keeps the allocation alive after the buffer is dropped.
        drop(buf);
        assert_eq!(probe(&rt).count("free"), 0);
        drop(view);
        assert_eq!(probe(&rt).count("free"), 1);
        // Once freed, the token no longer resolves locally, and never reaches the vendor.
        let err = rt.import(&token, DeviceId(0)).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument { .. }), "{err}");
        assert_eq!(probe(&rt).count("import"), 0);
    }

    #[test]
    fn a_token_from_another_host_is_refused_before_the_vendor() {
        let rt = probe_runtime();
        let mut parts_host = HostIdentity::current();
        parts_host.boot_id_hash ^= 1;
        let foreign = MemToken::new(MemTokenParts {
            mechanism: Mechanism::HipIpcMem,
            emulated: true,
            device: DeviceId(0),
            origin: TokenOrigin {
                pid: ProcessId(std::process::id() + 1),
                start_time: 1,
                host: parts_host,
            },
            generation: 1,
            object_size: 64,
            offset: 0,
            len: 64,
            payload: vec![9; 64],
        })
        .unwrap();
        let err = rt.import(&foreign, DeviceId(0)).unwrap_err();
        assert!(
            matches!(&err, Error::InvalidArgument { what } if what.contains("another host")),
            "{err}"
        );
        assert_eq!(probe(&rt).count("import"), 0);
    }

    #[test]
    fn a_token_for_another_backend_is_a_mismatch() {
        let rt = Runtime::from_backend(Backend::from(ProbeBackend::new(BackendKind::Ascend)));
        let err = rt.import(&remote(1, 0, 64), DeviceId(0)).unwrap_err();
        assert!(matches!(err, Error::BackendMismatch { .. }), "{err}");
        let text = err.to_string();
        assert!(
            text.starts_with("backend mismatch: expected an ascend token, found a hip token"),
            "{text}"
        );
    }

    #[test]
    fn buffer_bounds_are_checked() {
        let rt = probe_runtime();
        let buf = rt.allocate(DeviceId(0), 64).unwrap();
        assert!(buf.write(60, &[0; 4]).is_ok());
        assert!(matches!(
            buf.write(61, &[0; 4]),
            Err(Error::InvalidArgument { .. })
        ));
        let mut out = [0u8; 8];
        assert!(matches!(
            buf.read(usize::MAX, &mut out),
            Err(Error::InvalidArgument { .. })
        ));
        let imp = rt.import(&remote(1, 0, 16), DeviceId(0)).unwrap();
        assert!(matches!(
            imp.read(9, &mut out),
            Err(Error::InvalidArgument { .. })
        ));
    }

    #[test]
    fn concurrent_imports_of_one_handle_import_once() {
        let rt = probe_runtime();
        let token = remote(1, 0, 64);
        let held: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| s.spawn(|| rt.import(&token, DeviceId(0)).unwrap()))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(probe(&rt).count("import"), 1);
        drop(held);
        assert_eq!(probe(&rt).count("close"), 1);
    }
}
