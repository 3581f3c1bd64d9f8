//! The rules the ACL surface enforces: one stable id per rule, its vendor code, and where
//! the rule and the code come from, as data ([`RuleInfo`], shared with the HIP surface).
//!
//! Every check in the surface names one of these ids; the id appears in the thread's
//! last-error message (`aclGetRecentErrMsg`: `... [rule ascend.vmm.trustlist-required]`),
//! and the conformance suite lists [`ALL`]. Before returning a rule's error the surface
//! asks [`enforced`], so `DEVIPC_EMU_BREAK_RULE=<id>` switches exactly one rule off to
//! show that its scenario can fail. Rules whose violation would make the emulator itself
//! misbehave (a NULL out-parameter, a copy past the end of a mapping, a `MAP_FIXED`
//! outside a reservation) are not breakable ([`RuleInfo::breakable`]): the configuration
//! refuses their ids ([`crate::rules::parse_break_rules`]).
//!
//! One file per family, each with its id constants and its table: `device` (arguments,
//! initialisation, devices, contexts, handles, peers), `memory`, `vmm`, `ipc_key`,
//! `notify` (notifies, IPC events and the stream waits on them); [`ALL`] joins them.
//!
//! # Codes: documented or chosen
//!
//! [`Basis::Documented`] codes come from the vendor's headers, source or API reference
//! (api-facts A.3-A.11, C.4-C.6). Where the vendor does not say which code a violation
//! returns (api-facts D.4), the emulator *chooses* one ([`Basis::Chosen`], with the
//! reason). The policy for those:
//!
//! - refusals that the real runtime delegates to the NPU driver (`halShmem*`,
//!   `halMem*`: trustlists, same-process import, one-to-one shareable handles, peer
//!   access for cross-device imports, destroying a name others still hold) return
//!   **507899 `ACL_ERROR_RT_DRV_INTERNAL_ERROR`**: the runtime maps every driver error
//!   that is not in its table to it (`errcode_manage.cc`, api-facts A.11), and the one
//!   field observation (a trustlist rejection of `aclrtIpcMemImportByKey`) saw 507899;
//! - argument checks the runtime layer performs (sizes, ranges, alignment, flag values)
//!   return **107000 `ACL_ERROR_RT_PARAM_INVALID`**, the code the runtime's validation
//!   (`ApiErrorDecorator`, `RT_ERROR_INVALID_VALUE`) gives for the documented cases
//!   (`len`, `size`, `flags` of the IPC key calls);
//! - checks of the ACL wrapper itself (NULL pointers, reserved arguments, enumerations)
//!   return **100000 `ACL_ERROR_INVALID_PARAM`**;
//! - unknown or stale objects (handles, streams, notifies, keys, shareable handles)
//!   return **107017 `ACL_ERROR_RT_INVALID_HANDLE`** (the driver's
//!   `DRV_ERROR_INVALID_HANDLE` mapping).
//!
//! Behavioural rules (what *succeeds*, e.g. repeated key imports, the lifetime of
//! physical memory) have code [`ACL_SUCCESS`](devipc_ascend_sys::codes::ACL_SUCCESS) (0).

mod batch;
mod device;
mod ipc_key;
mod memory;
mod notify;
mod vmm;

pub use batch::*;
pub use device::*;
pub use ipc_key::*;
pub use memory::*;
pub use notify::*;
pub use vmm::*;

pub use crate::rules::{Basis, RuleInfo, enforced};

use devipc_ascend_sys::types::aclError;

const WHY_DRIVER: &str = "a driver-level refusal; the runtime maps driver errors outside its \
                          table to 507899 (errcode_manage.cc), the code seen in the field for \
                          a trustlist rejection";
const WHY_RT_PARAM: &str = "a runtime-layer argument check; 107000 is what the runtime's \
                            validation returns for the documented cases";
const WHY_HANDLE: &str = "an unknown or stale object; the driver's DRV_ERROR_INVALID_HANDLE \
                          maps to 107017";
const WHY_REVOKED: &str = "a device access to memory that is no longer mapped for the process; \
                           the vendor documents no code ('exceptions may occur'), the emulator \
                           reports the DMA fault 507013 on the copies that touch it";
const WHY_MAP: &str = "refused by the driver's mapping of the range (halMemMap); the vendor \
                       names no code, and an invalid argument of the driver \
                       (DRV_ERROR_INVALID_VALUE) maps to 107000";
const WHY_ACL_PARAM: &str = "checked by the ACL wrapper before the runtime is called; the \
                             exact code per function is unverified";

/// The tables of the files of this module, in the order of [`ALL`].
const TABLES: &[&[RuleInfo]] = &[
    device::RULES,
    memory::RULES,
    vmm::RULES,
    ipc_key::RULES,
    notify::RULES,
    batch::RULES,
];

/// Every rule of the ACL surface, family by family (`device`, `memory`, `vmm`, `ipc_key`,
/// `notify`, `batch`).
pub const ALL: &[RuleInfo] = &crate::rules::join::<{ crate::rules::total(TABLES) }>(TABLES);

/// The rule with this id.
pub fn info(id: &str) -> Option<&'static RuleInfo> {
    crate::rules::find(ALL, id)
}

/// The code a violation of `id` returns (the runtime-internal code if `id` is unknown,
/// which the unit tests rule out).
pub fn code_of(id: &str) -> aclError {
    info(id).map_or(devipc_ascend_sys::codes::ACL_ERROR_RT_INTERNAL_ERROR, |r| {
        r.code
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use devipc_ascend_sys::codes::ACL_SUCCESS;

    #[test]
    fn ids_are_unique_and_well_formed() {
        let mut ids: Vec<_> = ALL.iter().map(|r| r.id).collect();
        ids.sort_unstable();
        let n = ids.len();
        ids.dedup();
        assert_eq!(ids.len(), n, "duplicate rule id");
        for r in ALL {
            crate::config::validate_rule_id(r.id).unwrap();
            assert!(r.id.starts_with("ascend."), "{}", r.id);
            assert!(!r.summary.is_empty() && !r.source.is_empty(), "{}", r.id);
            assert_eq!((r.when_broken, r.since), (None, None), "{}", r.id);
            match r.basis {
                Basis::Behaviour => assert_eq!(r.code, ACL_SUCCESS, "{}", r.id),
                _ => {
                    assert_ne!(r.code, ACL_SUCCESS, "{}", r.id);
                    assert!(devipc_ascend_sys::error_name(r.code).is_some(), "{}", r.id);
                }
            }
        }
    }

    #[test]
    fn lookups() {
        assert_eq!(code_of(VMM_SAME_PROCESS), 507_899);
        assert_eq!(code_of(KEY_MIN_LEN), 107_000);
        assert_eq!(code_of(CONTEXT_REQUIRED), 107_002);
        assert_eq!(code_of("ascend.no-such-rule"), 507_000);
        assert!(info(NOTIFY_BINARY_SEMAPHORE).is_some());
        // Not breakable: always enforced whatever the environment says.
        assert!(enforced(PARAM_NULL_POINTER));
    }
}
