//! The three device-id spaces of the ACL runtime (issue 16): physical, logical, user.
//!
//! - **Physical** ids are the machine's ([`crate::machine`]): `0..DEVIPC_EMU_DEVICES`, what
//!   the state directory records.
//! - **Logical** ids are the driver's, in the process's container: logical id `i` is
//!   physical device `DEVIPC_EMU_ASCEND_PHY_IDS[i]` (default: every physical device, logical
//!   = physical). This models the container remap of the NPU driver (a container given
//!   `/dev/davinci4..7` numbers them 0..3).
//! - **User** ids are what the process passes to the ACL calls (`aclrtSetDevice`,
//!   `aclrtMallocPhysical`'s location, ...): `ASCEND_RT_VISIBLE_DEVICES` lists logical
//!   ids, and user id `i` is the `i`-th listed. Unset: user = logical.
//!
//! The CANN reference says so for `aclrtGetLogicDevIdByUserDevId` (python API doc
//! `get_logic_dev_id_by_user_dev_id`): without `ASCEND_RT_VISIBLE_DEVICES` the logical id
//! equals the user id, outside a container the physical id equals the logical id; its
//! example lists logical ids 1,2, so user 0 is logical 1, which the container maps to
//! physical 6.
//!
//! # Parsing `ASCEND_RT_VISIBLE_DEVICES`
//!
//! As the runtime's `Runtime::GetVisibleDevices` does, per its unit tests (hicann/runtime
//! `tests/ut/runtime/runtime/test/platform/others/rt_utest_runtime.cc`,
//! `ut_GetVisibleDevicesByChipCloudTest0`, three devices):
//! - set and empty: no device (`""` gives 0 devices);
//! - ids are read left to right; an empty entry (`",0"`, `"1,,"`), an entry that does not
//!   start with a digit (`"-1,3"`), an id out of `0..logical devices` (`"0,1,5,7"` gives
//!   0 and 1) or one too large to read (`"1234567891012345678910123456789"`) ends the list,
//!   keeping what came before;
//! - a character other than a digit or a comma ends the list after the digits before it
//!   (`"1*"` gives 1, `"0#1,"` gives 0, `"0,1$0,"` gives 0 and 1);
//! - a repeated id invalidates the whole list: no device (`"0,1,1"`, `"1,0,1"`, `"1,1,0"`
//!   all give 0), but reading stops once every logical device is listed (`"0,1,2,0"` gives
//!   3 on three devices).
//!
//! # Ids that are not there
//!
//! The runtime's conversions answer `RT_ERROR_DEVICE_ID` for an id outside the view
//! (`ChgUserDevIdToDeviceId(5)` and `GetUserDevIdByDeviceId(5)` with one visible device,
//! same test file), which the ACL layer reports as `ACL_ERROR_RT_INVALID_DEVICEID`
//! (107001), rule `ascend.device.id-translation-checked`. The emulator's choices where the
//! sources do not say: a logical id that exists but is not listed in
//! `ASCEND_RT_VISIBLE_DEVICES` has no user id (107001 as well); logical and physical ids
//! are checked against the container (`aclrtGetPhyDevIdByLogicDevId` answers for every
//! logical id of the container, listed or not: the driver does not read the runtime's
//! variable); with no device visible, `aclrtGetDeviceCount` writes 0 and succeeds.

use std::sync::OnceLock;

use super::errors::{AclFailure, AclResult};
use super::{process_state, rules};
use crate::config::Config;

/// The id spaces of one process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AscendView {
    /// Logical id `i` is physical device `phy_of_logical[i]`.
    phy_of_logical: Vec<u32>,
    /// User id `i` is logical id `logical_of_user[i]`.
    logical_of_user: Vec<u32>,
}

impl AscendView {
    /// The view of a process with `config` (`DEVIPC_EMU_ASCEND_PHY_IDS`,
    /// `ASCEND_RT_VISIBLE_DEVICES`; rule [`rules::DEVICE_VISIBLE_DEVICES_APPLIED`]
    /// switched off ignores the variable).
    pub fn of_config(config: &Config) -> AscendView {
        let phy_of_logical = config
            .ascend_phy_ids
            .clone()
            .unwrap_or_else(|| (0..config.devices).collect());
        let logical = phy_of_logical.len() as u32;
        let env = config.visibility.ascend_rt.as_deref();
        let logical_of_user = if config.enforces(rules::DEVICE_VISIBLE_DEVICES_APPLIED) {
            parse_visible_devices(env, logical)
        } else {
            (0..logical).collect()
        };
        AscendView {
            phy_of_logical,
            logical_of_user,
        }
    }

    /// Number of user devices (`aclrtGetDeviceCount`).
    pub fn user_count(&self) -> u32 {
        self.logical_of_user.len() as u32
    }

    /// Number of logical devices (the container's).
    pub fn logical_count(&self) -> u32 {
        self.phy_of_logical.len() as u32
    }

    /// The logical id of user id `user`.
    pub fn logical_of_user(&self, user: i32) -> Option<u32> {
        self.logical_of_user
            .get(usize::try_from(user).ok()?)
            .copied()
    }

    /// The user id of logical id `logical`, if listed.
    pub fn user_of_logical(&self, logical: i32) -> Option<u32> {
        let l = u32::try_from(logical).ok()?;
        self.logical_of_user
            .iter()
            .position(|x| *x == l)
            .map(|i| i as u32)
    }

    /// The physical id of logical id `logical`, if the container has it.
    pub fn physical_of_logical(&self, logical: i32) -> Option<u32> {
        self.phy_of_logical
            .get(usize::try_from(logical).ok()?)
            .copied()
    }

    /// The logical id of physical device `physical`, if the container has it.
    pub fn logical_of_physical(&self, physical: i32) -> Option<u32> {
        let p = u32::try_from(physical).ok()?;
        self.phy_of_logical
            .iter()
            .position(|x| *x == p)
            .map(|i| i as u32)
    }

    /// The physical id of user id `user`.
    pub fn physical_of_user(&self, user: i32) -> Option<u32> {
        self.physical_of_logical(self.logical_of_user(user)? as i32)
    }

    /// The user id of physical device `physical`, if the process sees it.
    pub fn user_of_physical(&self, physical: u32) -> Option<u32> {
        self.user_of_logical(self.logical_of_physical(physical as i32)? as i32)
    }
}

/// This process's view (computed on first use from the process's configuration).
pub fn view() -> AclResult<&'static AscendView> {
    static VIEW: OnceLock<AscendView> = OnceLock::new();
    let config = process_state::state()?.config();
    Ok(VIEW.get_or_init(|| AscendView::of_config(config)))
}

/// `ACL_ERROR_RT_INVALID_DEVICEID` for an id of `space` that is not there
/// ([`rules::DEVICE_ID_TRANSLATION`]).
pub fn no_such(space: &str, id: i32) -> AclFailure {
    AclFailure::rule(
        rules::DEVICE_ID_TRANSLATION,
        format!(
            "{space} device id {id} is not a device of this process (DEVIPC_EMU_DEVICES, \
             DEVIPC_EMU_ASCEND_PHY_IDS, ASCEND_RT_VISIBLE_DEVICES)"
        ),
    )
}

/// The logical ids `ASCEND_RT_VISIBLE_DEVICES` lists on a container of `logical` devices,
/// in user order (see the module docs); `None`: every logical device.
pub fn parse_visible_devices(env: Option<&str>, logical: u32) -> Vec<u32> {
    let Some(text) = env else {
        return (0..logical).collect();
    };
    let mut listed: Vec<u32> = Vec::new();
    for entry in text.split(',') {
        if listed.len() as u32 >= logical {
            break;
        }
        let digits_end = entry
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(entry.len());
        let digits = &entry[..digits_end];
        let Some(id) = digits.parse::<u32>().ok().filter(|id| *id < logical) else {
            break;
        };
        if listed.contains(&id) {
            return Vec::new();
        }
        listed.push(id);
        if digits_end < entry.len() {
            // Another character: the list ends after these digits.
            break;
        }
    }
    listed
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The runtime's unit-test table (three devices) and the emulator's own cases.
    #[test]
    fn visible_devices_as_the_runtime_parses_them() {
        let n = |text: &str| parse_visible_devices(Some(text), 3).len();
        for (text, count) in [
            ("", 0),
            (",0", 0),
            ("0,1,5,7", 2),
            ("1", 1),
            ("1,,", 1),
            ("1*", 1),
            ("1,", 1),
            ("0,1", 2),
            ("0,1$0,", 2),
            ("0#1,", 1),
            ("-1,3", 0),
            ("0,1,2", 3),
            ("0,1,2,0", 3),
            ("10,", 0),
            ("10", 0),
            ("10#", 0),
            ("1,-1", 1),
            ("0,1,1", 0),
            ("1,0,1", 0),
            ("1,1,0", 0),
            (
                "0,1,3,4,5,6,7,8,9,1,2,3,4,5,6,7,8,9,1,2,3,4,5,6,7,8,9,1,2,3,4,5,6,7,8,9",
                2,
            ),
            ("1234567891012345678910123456789", 0),
        ] {
            assert_eq!(n(text), count, "{text:?}");
        }
        assert_eq!(parse_visible_devices(Some("2,0"), 3), [2, 0]);
        assert_eq!(parse_visible_devices(None, 3), [0, 1, 2]);
        assert_eq!(parse_visible_devices(Some(" 1"), 3), Vec::<u32>::new());
    }

    #[test]
    fn the_chain_user_logical_physical() {
        let mut config = Config::for_dir("/tmp/unused");
        config.devices = 8;
        config.ascend_phy_ids = Some(vec![4, 5, 6, 7]);
        config.visibility.ascend_rt = Some("3,2".into());
        let v = AscendView::of_config(&config);
        assert_eq!((v.user_count(), v.logical_count()), (2, 4));
        assert_eq!(v.logical_of_user(0), Some(3));
        assert_eq!(v.physical_of_user(0), Some(7));
        assert_eq!(v.physical_of_user(1), Some(6));
        assert_eq!(v.physical_of_user(2), None);
        assert_eq!(v.user_of_logical(2), Some(1));
        assert_eq!(v.user_of_logical(0), None, "listed? no: hidden");
        assert_eq!(v.logical_of_physical(6), Some(2));
        assert_eq!(v.logical_of_physical(1), None, "not in the container");
        assert_eq!(v.physical_of_logical(0), Some(4));
        assert_eq!(v.user_of_physical(7), Some(0));
        assert_eq!(v.user_of_physical(4), None);
        // Switched off, the variable is ignored (the container stays).
        config.broken_rules = vec![rules::DEVICE_VISIBLE_DEVICES_APPLIED.into()];
        let v = AscendView::of_config(&config);
        assert_eq!(v.user_count(), 4);
        assert_eq!(v.physical_of_user(0), Some(4));
    }
}
