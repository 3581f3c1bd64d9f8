//! This process's own exports, for the same-process shortcut (DESIGN section 5.1).
//!
//! Importing a token in the process that exported it must not reach the vendor (Ascend
//! forbids same-process import, HIP answers `hipErrorInvalidContext`). Every export made
//! through the safe API is recorded here, process-wide (so a token exported through one
//! [`Runtime`](crate::Runtime) is recognised by another), keyed by the token's identity;
//! an import of such a token returns a view of the local memory instead.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use devipc_core::fork::{PerProcess, PerProcessGuard, forget_inherited};

use devipc_core::{DeviceId, DevicePtr, Error, MemToken, Result, TokenIdentity};

use crate::runtime::{Runtime, RuntimeInner};
use crate::shared::Owned;

/// What a local export points at.
#[derive(Debug, Clone)]
pub(crate) enum LocalTarget {
    /// A [`SharedBuffer`](crate::SharedBuffer)'s allocation; the view keeps it alive.
    Owned(Weak<Owned>),
    /// Memory the framework allocated ([`Runtime::export_external`](crate::Runtime::export_external)),
    /// exported through this runtime. Never served as a local view: devipc cannot keep
    /// the block alive (the framework frees it, and a free through the framework, or a
    /// `close_external` on the raw backend, would not reach a view), so a view could
    /// outlive it. The entry only lets the import say so; it goes with
    /// [`Runtime::close_external`](crate::Runtime::close_external) or with the runtime.
    External(Weak<RuntimeInner>),
}

#[derive(Debug, Clone)]
struct LocalExport {
    target: LocalTarget,
    generation: u64,
    /// Address of the exported vendor object's first byte (token offsets count from it).
    object_base: DevicePtr,
    /// Its size, as this process's backend reported it at export (not a token's claim).
    object_size: usize,
    device: DeviceId,
}

/// A view of local memory for a token this process exported.
#[derive(Debug)]
pub(crate) struct LocalView {
    /// Keeps the [`SharedBuffer`](crate::SharedBuffer)'s allocation alive while viewed.
    pub(crate) keepalive: Arc<Owned>,
    /// The runtime whose backend owns the memory (and copies to and from it).
    pub(crate) owner: Runtime,
    /// Where the token's range starts.
    pub(crate) ptr: DevicePtr,
    /// The device the memory lives on.
    pub(crate) device: DeviceId,
}

/// The map's size after the last sweep of dead entries.
static SWEPT_LEN: AtomicUsize = AtomicUsize::new(0);

/// Per process: a forked child's exports are its own (see `devipc_core::fork`).
static EXPORTS: PerProcess<HashMap<TokenIdentity, LocalExport>> = PerProcess::new(forget_inherited);

fn exports() -> PerProcessGuard<'static, HashMap<TokenIdentity, LocalExport>> {
    // Every critical section is a single map operation, so a poisoned map is consistent.
    EXPORTS.lock()
}

/// Records that `token` (just exported by this process) names memory starting at
/// `object_base`. The token's object size is this process's own backend's answer, so it
/// is trusted here; tokens looked up later are not.
pub(crate) fn register(token: &MemToken, target: LocalTarget, object_base: DevicePtr) {
    let object_size = usize::try_from(token.object_size()).unwrap_or(usize::MAX);
    let mut map = exports();
    // Drop entries whose buffers are gone, so the map stays proportional to the live
    // exports; amortised: only when it has doubled since the last sweep.
    if map.len() >= 2 * SWEPT_LEN.load(Ordering::Relaxed).max(64) {
        map.retain(|_, e| !e.is_dead());
        SWEPT_LEN.store(map.len(), Ordering::Relaxed);
    }
    map.insert(
        token.identity(),
        LocalExport {
            target,
            generation: token.generation(),
            object_base,
            object_size,
            device: token.device(),
        },
    );
}

impl LocalExport {
    fn is_dead(&self) -> bool {
        match &self.target {
            LocalTarget::Owned(w) => w.strong_count() == 0,
            LocalTarget::External(w) => w.strong_count() == 0,
        }
    }
}

/// Forgets the external exports of the block holding `ptr` on `device` (after
/// `close_external`): their tokens no longer resolve to local memory, which the framework
/// may now free and reuse.
pub(crate) fn forget_external(device: DeviceId, ptr: DevicePtr) {
    exports().retain(|_, e| {
        let holds_ptr = ptr.0 >= e.object_base.0 && ptr.0 - e.object_base.0 < e.object_size as u64;
        !(matches!(e.target, LocalTarget::External(_)) && e.device == device && holds_ptr)
    });
}

/// The local view for `token`, which this process exported: refused when the memory is
/// gone, the token names another generation, or its range does not fit the object.
pub(crate) fn lookup(token: &MemToken) -> Result<LocalView> {
    let freed = || {
        Error::invalid_argument(
            "this process exported the token, but the exported memory has been freed or its \
             external export closed",
        )
    };
    let unknown = || {
        Error::invalid_argument(
            "this process exported the token, but not through a devipc Runtime that is still \
             sharing it: the memory was freed or its external export closed, or it was \
             exported through the raw layer (devipc::raw), whose exports the Runtime does not \
             track; import it where it was exported from, or use the exporter's pointer",
        )
    };
    let entry = exports()
        .get(&token.identity())
        .cloned()
        .ok_or_else(unknown)?;
    if entry.generation != token.generation() {
        return Err(Error::invalid_token(format!(
            "the token names generation {} of an object this process exports as generation \
             {}: it names a freed object or was relabelled",
            token.generation(),
            entry.generation
        )));
    }
    let range = token.range_within(entry.object_size)?;
    let owned = match &entry.target {
        LocalTarget::Owned(weak) => weak.upgrade().ok_or_else(freed)?,
        LocalTarget::External(weak) => {
            if weak.strong_count() == 0 {
                return Err(freed());
            }
            return Err(Error::Unsupported {
                backend: token.backend(),
                what: "importing framework memory (export_external) in the process that \
                       exported it: its lifetime is the framework's, so devipc cannot keep a \
                       view's block alive; use the pointer you exported"
                    .into(),
            });
        }
    };
    let owner = owned.runtime().clone();
    let keepalive = owned;
    Ok(LocalView {
        keepalive,
        owner,
        ptr: entry.object_base.offset(range.start)?,
        device: entry.device,
    })
}
