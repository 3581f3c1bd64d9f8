//! [`AclInit`]: one backend's hold on ACL's process-wide initialisation (`aclInit` /
//! `aclFinalize`), shared by every devipc backend on the same runtime in a process.

use std::sync::Arc;

use devipc_ascend_sys::AclApi;
use devipc_core::fork::{PerProcess, forget_inherited};
use devipc_core::{Birth, Result};

use crate::result;

/// Live devipc backends per loaded runtime (keyed by the address of its `aclFinalize`)
/// and process, and whether devipc's `aclInit` initialised ACL there. See
/// [`AscendBackend`]. A child `fork`ed from a process with a live backend inherits its
/// entries, which are not its own: it initialises ACL afresh and never finalizes for the
/// parent.
static ACL_INITS: PerProcess<Vec<InitEntry>> = PerProcess::new(forget_inherited);

#[derive(Debug)]
struct InitEntry {
    runtime: usize,
    live: usize,
    devipc_initialized: bool,
    /// A backend left something open that `aclFinalize` could tear down (see
    /// [`AclInit::keep_initialized`]): the last backend does not finalize.
    pinned: bool,
}

/// One backend's hold on the process-wide ACL initialisation; released on drop (in the
/// process that took it).
#[derive(Debug)]
pub(crate) struct AclInit {
    api: Arc<AclApi>,
    runtime: usize,
    pub(crate) birth: Birth,
}

impl AclInit {
    /// Calls `aclInit(NULL)` unless another live backend on the same runtime already did,
    /// accepting `ACL_ERROR_REPEAT_INITIALIZE`.
    pub(crate) fn acquire(api: &Arc<AclApi>) -> Result<AclInit> {
        let runtime = api.aclFinalize as usize;
        let birth = Birth::here();
        let mut inits = ACL_INITS.lock();
        if let Some(entry) = inits.iter_mut().find(|e| e.runtime == runtime) {
            entry.live += 1;
        } else {
            // false: ACL_ERROR_REPEAT_INITIALIZE, the framework initialised ACL.
            let devipc_initialized = result::init(api)?;
            inits.push(InitEntry {
                runtime,
                live: 1,
                devipc_initialized,
                pinned: false,
            });
        }
        Ok(AclInit {
            api: Arc::clone(api),
            runtime,
            birth,
        })
    }

    /// Never finalize ACL for this runtime from now on: something devipc shared (a key
    /// left open for a live importer) must outlive the backends. The framework or the
    /// process exit tears ACL down instead.
    pub(crate) fn keep_initialized(&self) {
        if let Some(entry) = ACL_INITS
            .lock()
            .iter_mut()
            .find(|e| e.runtime == self.runtime)
        {
            entry.pinned = true;
        }
    }

    pub(crate) fn devipc_initialized(&self) -> bool {
        ACL_INITS
            .lock()
            .iter()
            .any(|e| e.runtime == self.runtime && e.devipc_initialized)
    }
}

impl Drop for AclInit {
    /// The last backend on the runtime finalizes ACL, if devipc initialised it. The lock
    /// is held across `aclFinalize` so that a backend starting meanwhile initialises
    /// afresh rather than racing the teardown.
    fn drop(&mut self) {
        if self.birth.is_inherited() {
            // The parent's initialisation, copied by fork: the parent finalizes it.
            return;
        }
        let mut inits = ACL_INITS.lock();
        let Some(index) = inits.iter().position(|e| e.runtime == self.runtime) else {
            return;
        };
        inits[index].live -= 1;
        if inits[index].live > 0 {
            return;
        }
        let entry = inits.swap_remove(index);
        if entry.devipc_initialized && !entry.pinned {
            // devipc's own aclInit is being balanced, and no other devipc backend on this
            // runtime is alive. REPEAT_FINALIZE (the framework finalized ACL already) is
            // no error: nothing is left to do.
            if let Err(e) = result::finalize(&self.api) {
                log::error!("devipc-ascend: {e}");
            }
        }
    }
}
