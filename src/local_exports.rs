//! This process's own exports, for the same-process shortcut (DESIGN section 5.1).
//!
//! Importing a token in the process that exported it must not reach the vendor (Ascend
//! forbids same-process import, HIP answers `hipErrorInvalidContext`). Every export made
//! through the safe API is recorded here, process-wide (so a token exported through one
//! [`Runtime`](crate::Runtime) is recognised by another), keyed by the token's identity;
//! an import of such a token returns a view of the local memory instead.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, Weak};

use devipc_core::{DeviceId, DevicePtr, MemToken, TokenIdentity};

use crate::shared::Owned;

/// What a local export points at.
#[derive(Debug, Clone)]
pub(crate) enum LocalTarget {
    /// A [`SharedBuffer`](crate::SharedBuffer)'s allocation; the view keeps it alive.
    Owned(Weak<Owned>),
    /// Memory the framework allocated ([`Runtime::export_external`](crate::Runtime::export_external));
    /// its lifetime is the framework's business.
    External,
}

#[derive(Debug, Clone)]
struct LocalExport {
    target: LocalTarget,
    generation: u64,
    /// Address of the exported vendor object's first byte (token offsets count from it).
    object_base: DevicePtr,
    device: DeviceId,
}

/// A view of local memory for a token this process exported.
#[derive(Debug)]
pub(crate) struct LocalView {
    /// Keeps a [`SharedBuffer`](crate::SharedBuffer)'s allocation alive while viewed.
    pub(crate) keepalive: Option<Arc<Owned>>,
    /// Where the token's range starts.
    pub(crate) ptr: DevicePtr,
    /// The device the memory lives on.
    pub(crate) device: DeviceId,
}

/// The map's size after the last sweep of dead entries.
static SWEPT_LEN: AtomicUsize = AtomicUsize::new(0);

static EXPORTS: LazyLock<Mutex<HashMap<TokenIdentity, LocalExport>>> =
    LazyLock::new(Default::default);

fn exports() -> MutexGuard<'static, HashMap<TokenIdentity, LocalExport>> {
    // Every critical section is a single map operation, so a poisoned map is consistent.
    EXPORTS.lock().unwrap_or_else(|p| p.into_inner())
}

/// Records that `token` (just exported by this process) names memory starting at
/// `object_base`.
pub(crate) fn register(token: &MemToken, target: LocalTarget, object_base: DevicePtr) {
    let mut map = exports();
    // Drop entries whose buffers are gone, so the map stays proportional to the live
    // exports; amortised: only when it has doubled since the last sweep.
    if map.len() >= 2 * SWEPT_LEN.load(Ordering::Relaxed).max(64) {
        map.retain(|_, e| !matches!(&e.target, LocalTarget::Owned(w) if w.strong_count() == 0));
        SWEPT_LEN.store(map.len(), Ordering::Relaxed);
    }
    map.insert(
        token.identity(),
        LocalExport {
            target,
            generation: token.generation(),
            object_base,
            device: token.device(),
        },
    );
}

/// The local view for `token`, if this process exported it and the memory is still live.
pub(crate) fn lookup(token: &MemToken) -> Option<LocalView> {
    let entry = exports().get(&token.identity())?.clone();
    if entry.generation != token.generation() {
        return None;
    }
    let keepalive = match &entry.target {
        LocalTarget::Owned(weak) => Some(weak.upgrade()?),
        LocalTarget::External => None,
    };
    let ptr = entry
        .object_base
        .offset(usize::try_from(token.offset()).ok()?)
        .ok()?;
    Some(LocalView {
        keepalive,
        ptr,
        device: entry.device,
    })
}
