//! Emulator configuration: from the environment once per process, or built explicitly.
//!
//! The surfaces read [`Config::global`] (via [`crate::State::global`]); tests build a
//! [`Config`] with [`Config::for_dir`] and adjust fields, so no test depends on the
//! caller's environment or touches the user's default state directory.
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `DEVIPC_EMU_DIR` | state directory (absolute path) | `/dev/shm/devipc-emu-$UID` |
//! | `DEVIPC_EMU_DEVICES` | number of emulated devices, 0..=[`MAX_DEVICES`] | 2 |
//! | `DEVIPC_EMU_HIP_VERSION` | HIP runtime version, `major.minor[.patch]` | 6.2 |
//! | `DEVIPC_EMU_MEM_LIMIT` | per-device memory, bytes or with `K`/`M`/`G`/`T` (`KiB`...) | 1 GiB |
//! | `DEVIPC_EMU_PEERS` | which devices can peer: `all`, `none`, or pairs `0-1,2-3` (both ways), in physical ids | `all` |
//! | `DEVIPC_EMU_ASCEND_PHY_IDS` | the container view of the ACL surface: logical device i is physical device `list[i]` (e.g. `4,5,6,7`), distinct ids below `DEVIPC_EMU_DEVICES` | logical = physical, all devices |
//! | `DEVIPC_EMU_ASCEND_SET_ACCESS_IDS` | which device ids `aclrtMemSetAccess` reads in `aclrtMemAccessDesc::location.id`: `user` (the process's ids, as the other ACL calls) or `logical` (the driver's, as CANN runtimes that pass the descriptor to the driver unconverted expect) | `user` |
//! | `DEVIPC_EMU_BREAK_RULE` | test only: rule ids (comma-separated) the surfaces must NOT enforce; only breakable rules of either surface ([`crate::rules::parse_break_rules`]) | none |
//!
//! # Devices and the vendors' visibility variables
//!
//! The emulated machine has `DEVIPC_EMU_DEVICES` physical devices, numbered `0..N`
//! ([`crate::machine`]); everything shared between processes (objects, memory accounting,
//! `DEVIPC_EMU_PEERS`) names them by that physical id. Each process sees them through the
//! vendors' own variables, read here with the rest of the configuration (so a test can set
//! them with [`Config::from_lookup`]) and interpreted by the surfaces as the real runtimes
//! do ([`crate::hip`]'s `visibility.rs`, [`crate::acl`]'s `visibility.rs`):
//! `ROCR_VISIBLE_DEVICES`, `HIP_VISIBLE_DEVICES` and `CUDA_VISIBLE_DEVICES` for HIP,
//! `ASCEND_RT_VISIBLE_DEVICES` (after the container view `DEVIPC_EMU_ASCEND_PHY_IDS`) for
//! ACL. Unlike the `DEVIPC_EMU_*` variables, an empty value is not "unset" for them: the
//! vendors give it a meaning (ROCr and the ACL runtime: no device at all).
//!
//! Processes sharing one state directory should agree on `DEVIPC_EMU_DEVICES` and
//! `DEVIPC_EMU_MEM_LIMIT`: the bytes in use are shared (the ledger), but each process
//! checks the limit it was configured with.
//!
//! An empty value counts as unset, except for `DEVIPC_EMU_DIR`: an empty directory is an
//! error (most likely a variable meant to be set that expanded to nothing), not a quiet
//! fallback to the shared default. A malformed value is an [`EmuError::Config`] naming the
//! variable, the value and what would be accepted; nothing panics.

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;
use std::sync::OnceLock;

use crate::error::EmuError;

/// `DEVIPC_EMU_DIR`.
pub const ENV_DIR: &str = "DEVIPC_EMU_DIR";
/// `DEVIPC_EMU_DEVICES`.
pub const ENV_DEVICES: &str = "DEVIPC_EMU_DEVICES";
/// `DEVIPC_EMU_HIP_VERSION`.
pub const ENV_HIP_VERSION: &str = "DEVIPC_EMU_HIP_VERSION";
/// `DEVIPC_EMU_MEM_LIMIT`.
pub const ENV_MEM_LIMIT: &str = "DEVIPC_EMU_MEM_LIMIT";
/// `DEVIPC_EMU_BREAK_RULE`.
pub const ENV_BREAK_RULE: &str = "DEVIPC_EMU_BREAK_RULE";
/// `DEVIPC_EMU_PEERS`.
pub const ENV_PEERS: &str = "DEVIPC_EMU_PEERS";
/// `DEVIPC_EMU_ASCEND_PHY_IDS`.
pub const ENV_ASCEND_PHY_IDS: &str = "DEVIPC_EMU_ASCEND_PHY_IDS";
/// `DEVIPC_EMU_ASCEND_SET_ACCESS_IDS`.
pub const ENV_ASCEND_SET_ACCESS_IDS: &str = "DEVIPC_EMU_ASCEND_SET_ACCESS_IDS";
/// ROCr's `ROCR_VISIBLE_DEVICES` (read by the HIP surface).
pub const ENV_ROCR_VISIBLE_DEVICES: &str = "ROCR_VISIBLE_DEVICES";
/// CLR's `HIP_VISIBLE_DEVICES` (read by the HIP surface).
pub const ENV_HIP_VISIBLE_DEVICES: &str = "HIP_VISIBLE_DEVICES";
/// `CUDA_VISIBLE_DEVICES`, which CLR reads when `HIP_VISIBLE_DEVICES` is unset or empty.
pub const ENV_CUDA_VISIBLE_DEVICES: &str = "CUDA_VISIBLE_DEVICES";
/// The ACL runtime's `ASCEND_RT_VISIBLE_DEVICES` (read by the ACL surface).
pub const ENV_ASCEND_RT_VISIBLE_DEVICES: &str = "ASCEND_RT_VISIBLE_DEVICES";

/// The vendors' visibility variables of this process, as set (an empty value is kept:
/// it means something to the vendors). Interpreted by the surfaces, not here.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VisibilityEnv {
    /// `ROCR_VISIBLE_DEVICES`.
    pub rocr: Option<String>,
    /// `HIP_VISIBLE_DEVICES`.
    pub hip: Option<String>,
    /// `CUDA_VISIBLE_DEVICES`.
    pub cuda: Option<String>,
    /// `ASCEND_RT_VISIBLE_DEVICES`.
    pub ascend_rt: Option<String>,
}

/// Which device ids `aclrtMemSetAccess` reads in its descriptors
/// (`DEVIPC_EMU_ASCEND_SET_ACCESS_IDS`): see the ACL surface's `vmm.rs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AscendIdSpace {
    /// User device ids (`ASCEND_RT_VISIBLE_DEVICES` numbering), as every other ACL call
    /// taking a device: the default.
    #[default]
    User,
    /// Logical device ids (the driver's, in the container), as the CANN runtimes expect
    /// whose `aclrtMemSetAccess` hands the descriptor to the driver unconverted.
    Logical,
}

/// Which pairs of distinct devices can access each other's memory (`DEVIPC_EMU_PEERS`):
/// what `hipDeviceCanAccessPeer` / `aclrtDeviceCanAccessPeer` report, and what decides
/// whether enabling peer access, a cross-device IPC open, a key import with
/// `ENABLE_PEER_ACCESS` or a cross-device notify import can succeed. Real machines differ
/// (PCIe topology, XGMI / HCCS links), so it is configured, not assumed. A device is never
/// its own peer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum PeerMatrix {
    /// Every pair of distinct devices (the default).
    #[default]
    All,
    /// Exactly these pairs, both ways; `(a, b)` with `a < b`. Empty: no device peers.
    Pairs(Vec<(u32, u32)>),
}

impl PeerMatrix {
    /// Whether `from` can access `to`'s memory.
    pub fn can_peer(&self, from: u32, to: u32) -> bool {
        if from == to {
            return false;
        }
        match self {
            PeerMatrix::All => true,
            PeerMatrix::Pairs(pairs) => pairs.contains(&(from.min(to), from.max(to))),
        }
    }

    /// Parses `all`, `none` or `a-b[,c-d...]` with device ids below `devices`.
    pub fn parse(text: &str, devices: u32) -> Result<PeerMatrix, String> {
        match text.trim() {
            "all" => return Ok(PeerMatrix::All),
            "none" => return Ok(PeerMatrix::Pairs(Vec::new())),
            _ => {}
        }
        let mut pairs = Vec::new();
        for pair in text.split(',') {
            let bad = || {
                format!(
                    "`{pair}` is not a pair `a-b` of device ids below {devices}; expected all, none or pairs such as 0-1,2-3"
                )
            };
            let (a, b) = pair.trim().split_once('-').ok_or_else(bad)?;
            let (a, b): (u32, u32) = (
                a.trim().parse().map_err(|_| bad())?,
                b.trim().parse().map_err(|_| bad())?,
            );
            if a == b || a >= devices || b >= devices {
                return Err(bad());
            }
            let p = (a.min(b), a.max(b));
            if !pairs.contains(&p) {
                pairs.push(p);
            }
        }
        pairs.sort_unstable();
        Ok(PeerMatrix::Pairs(pairs))
    }
}

/// Most emulated devices (the ledger has one usage slot per device).
pub const MAX_DEVICES: u32 = 64;
/// Default device count.
pub const DEFAULT_DEVICES: u32 = 2;
/// Default per-device memory limit: 1 GiB.
pub const DEFAULT_MEM_LIMIT: u64 = 1 << 30;
/// Longest accepted rule id.
pub const MAX_RULE_ID_LEN: usize = 128;

/// A HIP runtime version, kept in the `HIP_VERSION` encoding that `hipRuntimeGetVersion`
/// returns: `major * 10_000_000 + minor * 100_000 + patch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HipVersion(i32);

impl HipVersion {
    /// The default, HIP 6.2.0.
    pub const DEFAULT: HipVersion = HipVersion(60_200_000);

    /// From components; `None` unless `major` is 1..=213, `minor` 0..=99 and `patch`
    /// 0..=99_999 (so the encoding is unambiguous and fits an `i32`).
    pub fn new(major: u32, minor: u32, patch: u32) -> Option<HipVersion> {
        if !(1..=213).contains(&major) || minor > 99 || patch > 99_999 {
            return None;
        }
        let v = i64::from(major) * 10_000_000 + i64::from(minor) * 100_000 + i64::from(patch);
        i32::try_from(v).ok().map(HipVersion)
    }

    /// Parses `major.minor` or `major.minor.patch` (e.g. `6.2`, `5.2.3`, `6.2.41133`).
    pub fn parse(text: &str) -> Result<HipVersion, String> {
        let parts: Vec<&str> = text.split('.').collect();
        if !(2..=3).contains(&parts.len()) {
            return Err("expected major.minor or major.minor.patch, e.g. 6.2".into());
        }
        let mut nums = [0u32; 3];
        for (slot, part) in nums.iter_mut().zip(&parts) {
            if part.is_empty() || part.len() > 5 || !part.bytes().all(|b| b.is_ascii_digit()) {
                return Err(format!("{part:?} is not a version number component"));
            }
            *slot = part
                .parse()
                .map_err(|_| format!("{part:?} is out of range"))?;
        }
        HipVersion::new(nums[0], nums[1], nums[2])
            .ok_or_else(|| "out of range: major 1..=213, minor 0..=99, patch 0..=99999".to_string())
    }

    /// The `HIP_VERSION` encoding, as `hipRuntimeGetVersion` reports it.
    pub fn encoded(self) -> i32 {
        self.0
    }

    /// The major version.
    pub fn major(self) -> u32 {
        (self.0 / 10_000_000) as u32
    }

    /// The minor version.
    pub fn minor(self) -> u32 {
        (self.0 / 100_000 % 100) as u32
    }

    /// The patch number.
    pub fn patch(self) -> u32 {
        (self.0 % 100_000) as u32
    }

    /// Whether this runtime is at least `major.minor`.
    pub fn at_least(self, major: u32, minor: u32) -> bool {
        (self.major(), self.minor()) >= (major, minor)
    }
}

impl fmt::Display for HipVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major(), self.minor(), self.patch())
    }
}

/// The emulator configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The state directory shared by all emulated processes.
    pub dir: PathBuf,
    /// Number of emulated devices.
    pub devices: u32,
    /// The HIP runtime version the HIP surface reports and whose rules it follows.
    pub hip_version: HipVersion,
    /// Per-device memory limit in bytes, enforced across processes.
    pub mem_limit: u64,
    /// Which devices can peer.
    pub peers: PeerMatrix,
    /// Test only: the rule ids the surfaces must not enforce (usually one).
    pub broken_rules: Vec<String>,
    /// The ACL container view (`DEVIPC_EMU_ASCEND_PHY_IDS`): logical device i is physical
    /// device `ascend_phy_ids[i]`; `None` is the identity over every physical device.
    pub ascend_phy_ids: Option<Vec<u32>>,
    /// The id space of `aclrtMemSetAccess` descriptors (`DEVIPC_EMU_ASCEND_SET_ACCESS_IDS`).
    pub ascend_set_access_ids: AscendIdSpace,
    /// The vendors' visibility variables.
    pub visibility: VisibilityEnv,
}

impl Config {
    /// Defaults with an explicit state directory: what tests start from.
    pub fn for_dir(dir: impl Into<PathBuf>) -> Config {
        Config {
            dir: dir.into(),
            devices: DEFAULT_DEVICES,
            hip_version: HipVersion::DEFAULT,
            mem_limit: DEFAULT_MEM_LIMIT,
            peers: PeerMatrix::All,
            broken_rules: Vec::new(),
            ascend_phy_ids: None,
            ascend_set_access_ids: AscendIdSpace::User,
            visibility: VisibilityEnv::default(),
        }
    }

    /// Reads the `DEVIPC_EMU_*` variables of this process.
    pub fn from_env() -> Result<Config, EmuError> {
        Config::from_lookup(|name| std::env::var_os(name))
    }

    /// The configuration of this process, read from the environment on first use and
    /// then fixed for the life of the process.
    pub fn global() -> Result<&'static Config, &'static EmuError> {
        static GLOBAL: OnceLock<Result<Config, EmuError>> = OnceLock::new();
        GLOBAL.get_or_init(Config::from_env).as_ref()
    }

    /// Builds a configuration from any variable lookup (the environment, a map in a
    /// test). Empty values count as unset, except an empty `DEVIPC_EMU_DIR` (an error).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<OsString>) -> Result<Config, EmuError> {
        let get = |var: &'static str| lookup(var).filter(|v| !v.is_empty());
        let text = |var: &'static str| -> Result<Option<String>, EmuError> {
            get(var)
                .map(|v| {
                    v.into_string().map_err(|v| EmuError::Config {
                        var,
                        value: v.to_string_lossy().into_owned(),
                        reason: "not valid UTF-8".into(),
                    })
                })
                .transpose()
        };
        let bad = |var: &'static str, value: &str, reason: String| EmuError::Config {
            var,
            value: value.to_owned(),
            reason,
        };

        let dir = match lookup(ENV_DIR) {
            Some(v) if v.is_empty() => {
                return Err(bad(
                    ENV_DIR,
                    "",
                    "is empty; unset it to use the default /dev/shm/devipc-emu-$UID, or name \
                     an absolute directory"
                        .into(),
                ));
            }
            Some(v) => {
                let p = PathBuf::from(v);
                if !p.is_absolute() {
                    return Err(bad(
                        ENV_DIR,
                        &p.to_string_lossy(),
                        "must be an absolute path".into(),
                    ));
                }
                p
            }
            None => default_dir(),
        };

        let mut config = Config::for_dir(dir);
        if let Some(v) = text(ENV_DEVICES)? {
            config.devices = parse_devices(&v).map_err(|r| bad(ENV_DEVICES, &v, r))?;
        }
        if let Some(v) = text(ENV_HIP_VERSION)? {
            config.hip_version = HipVersion::parse(&v).map_err(|r| bad(ENV_HIP_VERSION, &v, r))?;
        }
        if let Some(v) = text(ENV_MEM_LIMIT)? {
            config.mem_limit = parse_mem_limit(&v).map_err(|r| bad(ENV_MEM_LIMIT, &v, r))?;
        }
        if let Some(v) = text(ENV_PEERS)? {
            config.peers =
                PeerMatrix::parse(&v, config.devices).map_err(|r| bad(ENV_PEERS, &v, r))?;
        }
        if let Some(v) = text(ENV_ASCEND_PHY_IDS)? {
            config.ascend_phy_ids = Some(
                parse_phy_ids(&v, config.devices).map_err(|r| bad(ENV_ASCEND_PHY_IDS, &v, r))?,
            );
        }
        if let Some(v) = text(ENV_ASCEND_SET_ACCESS_IDS)? {
            config.ascend_set_access_ids = match v.trim() {
                "user" => AscendIdSpace::User,
                "logical" => AscendIdSpace::Logical,
                _ => {
                    return Err(bad(
                        ENV_ASCEND_SET_ACCESS_IDS,
                        &v,
                        "expected user or logical".into(),
                    ));
                }
            };
        }
        // The vendors' variables: empty is a value, and bytes that are not UTF-8 become
        // U+FFFD, which no vendor parser accepts (the list ends there, as for any bad entry).
        let raw = |var: &str| lookup(var).map(|v| v.to_string_lossy().into_owned());
        config.visibility = VisibilityEnv {
            rocr: raw(ENV_ROCR_VISIBLE_DEVICES),
            hip: raw(ENV_HIP_VISIBLE_DEVICES),
            cuda: raw(ENV_CUDA_VISIBLE_DEVICES),
            ascend_rt: raw(ENV_ASCEND_RT_VISIBLE_DEVICES),
        };
        if let Some(v) = text(ENV_BREAK_RULE)? {
            // One parser for both surfaces: it refuses an id no surface has and a rule that
            // cannot be switched off, naming it.
            config.broken_rules =
                crate::rules::parse_break_rules(&v).map_err(|r| bad(ENV_BREAK_RULE, &v, r))?;
        }
        Ok(config)
    }

    /// Whether the surfaces must skip enforcing `rule_id` (the conformance suite sets
    /// `DEVIPC_EMU_BREAK_RULE` to show a rule's scenario can fail). A surface checks it
    /// right where it would return the rule's error:
    ///
    /// ```
    /// # use devipc_emulator::Config;
    /// let mut config = Config::for_dir("/tmp/x");
    /// config.broken_rules = vec!["hip.mem.open-in-exporter-rejected".into()];
    /// assert!(config.rule_broken("hip.mem.open-in-exporter-rejected"));
    /// assert!(!config.rule_broken("hip.event.open-in-exporter-rejected"));
    /// ```
    pub fn rule_broken(&self, rule_id: &str) -> bool {
        self.broken_rules.iter().any(|r| r == rule_id)
    }

    /// Whether `rule_id` is enforced: the negation of [`Config::rule_broken`].
    pub fn enforces(&self, rule_id: &str) -> bool {
        !self.rule_broken(rule_id)
    }
}

/// `/dev/shm/devipc-emu-$EUID`, or the same name under the temp dir when `/dev/shm` is
/// missing.
pub fn default_dir() -> PathBuf {
    let name = format!("devipc-emu-{}", devipc_shm::os::effective_uid());
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir() {
        shm.join(name)
    } else {
        std::env::temp_dir().join(name)
    }
}

fn parse_devices(text: &str) -> Result<u32, String> {
    let n: u32 = text
        .trim()
        .parse()
        .map_err(|_| format!("expected a whole number 0..={MAX_DEVICES}"))?;
    if n > MAX_DEVICES {
        return Err(format!("at most {MAX_DEVICES} devices"));
    }
    Ok(n)
}

/// Parses `DEVIPC_EMU_ASCEND_PHY_IDS`: comma-separated distinct physical ids below
/// `devices` (at least one; spaces around an id are allowed).
pub fn parse_phy_ids(text: &str, devices: u32) -> Result<Vec<u32>, String> {
    let mut ids = Vec::new();
    for part in text.split(',') {
        let bad = || {
            format!(
                "`{part}` is not a physical device id below {devices} (DEVIPC_EMU_DEVICES); \
                 expected distinct ids such as 4,5,6,7"
            )
        };
        let id: u32 = part.trim().parse().map_err(|_| bad())?;
        if id >= devices {
            return Err(bad());
        }
        if ids.contains(&id) {
            return Err(format!("physical device {id} is listed twice"));
        }
        ids.push(id);
    }
    Ok(ids)
}

/// Parses a byte count: digits, optionally followed by `K`, `M`, `G` or `T` (binary
/// multiples; `KiB`, `MiB`, ... and lower case are accepted). Must be non-zero.
pub fn parse_mem_limit(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let digits_end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, suffix) = t.split_at(digits_end);
    if digits.is_empty() {
        return Err("expected a byte count such as 1073741824, 512M or 2GiB".into());
    }
    let shift = match suffix.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return Err(format!("unknown unit {suffix:?}; use K, M, G or T")),
    };
    let n: u64 = digits.parse().map_err(|_| "number too large".to_string())?;
    let bytes = n
        .checked_mul(1u64 << shift)
        .ok_or_else(|| "number too large".to_string())?;
    if bytes == 0 {
        return Err("the limit must be at least 1 byte".into());
    }
    Ok(bytes)
}

/// Checks the shape of a rule id: 1..=128 characters of `a-z 0-9 . - _`, starting with a
/// letter or digit (e.g. `ascend.vmm.same-process-import-rejected`).
pub fn validate_rule_id(id: &str) -> Result<(), String> {
    let ok_char = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b);
    let first_ok = id
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    if id.len() > MAX_RULE_ID_LEN || !first_ok || !id.bytes().all(ok_char) {
        return Err(format!(
            "a rule id is 1..={MAX_RULE_ID_LEN} characters of a-z 0-9 . - _, \
             e.g. hip.mem.open-in-exporter-rejected"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn config(vars: &[(&str, &str)]) -> Result<Config, EmuError> {
        let map: HashMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), OsString::from(v)))
            .collect();
        Config::from_lookup(|k| map.get(k).cloned())
    }

    fn err_var(r: Result<Config, EmuError>) -> &'static str {
        match r {
            Err(EmuError::Config { var, .. }) => var,
            other => panic!("expected a config error, got {other:?}"),
        }
    }

    #[test]
    fn defaults() {
        let c = config(&[]).unwrap();
        assert_eq!(c.devices, 2);
        assert_eq!(c.hip_version.encoded(), 60_200_000);
        assert_eq!(c.mem_limit, 1 << 30);
        assert!(c.broken_rules.is_empty());
        let uid = devipc_shm::os::effective_uid();
        assert!(c.dir.ends_with(format!("devipc-emu-{uid}")));
        // Empty counts as unset, except for the directory.
        assert_eq!(config(&[(ENV_DEVICES, "")]).unwrap(), c);
        assert_eq!(err_var(config(&[(ENV_DIR, "")])), ENV_DIR);
    }

    #[test]
    fn explicit_values() {
        let c = config(&[
            (ENV_DIR, "/tmp/emu-x"),
            (ENV_DEVICES, "8"),
            (ENV_HIP_VERSION, "5.2"),
            (ENV_MEM_LIMIT, "64MiB"),
            (ENV_BREAK_RULE, "hip.mem.open-in-exporter-rejected"),
        ])
        .unwrap();
        assert_eq!(c.dir, PathBuf::from("/tmp/emu-x"));
        assert_eq!(c.devices, 8);
        assert_eq!(c.hip_version.encoded(), 50_200_000);
        assert_eq!(c.mem_limit, 64 << 20);
        assert!(c.rule_broken("hip.mem.open-in-exporter-rejected"));
        assert!(!c.enforces("hip.mem.open-in-exporter-rejected"));
        assert!(c.enforces("ascend.vmm.same-process-import-rejected"));
        assert_eq!(config(&[(ENV_DEVICES, "0")]).unwrap().devices, 0);
        // Peers: all by default, none, or listed pairs (both ways).
        assert!(c.peers.can_peer(0, 1) && !c.peers.can_peer(1, 1));
        let c = config(&[(ENV_DEVICES, "4"), (ENV_PEERS, "2-1, 0-3")]).unwrap();
        assert_eq!(c.peers, PeerMatrix::Pairs(vec![(0, 3), (1, 2)]));
        assert!(c.peers.can_peer(1, 2) && c.peers.can_peer(2, 1) && c.peers.can_peer(3, 0));
        assert!(!c.peers.can_peer(0, 1) && !c.peers.can_peer(2, 3));
        let none = config(&[(ENV_PEERS, "none")]).unwrap();
        assert!(!none.peers.can_peer(0, 1));
        for bad in ["0-2", "1-1", "0", "a-b", "0-1,", "all,0-1"] {
            assert_eq!(err_var(config(&[(ENV_PEERS, bad)])), ENV_PEERS, "{bad}");
        }
        // Several rules, comma-separated; only rules the emulator has.
        let two = "hip.mem.open-returns-base,ascend.ipc-key.trustlist-required";
        let c = config(&[(ENV_BREAK_RULE, two)]).unwrap();
        assert!(c.rule_broken("hip.mem.open-returns-base"));
        assert!(c.rule_broken("ascend.ipc-key.trustlist-required"));
        assert!(c.enforces("hip.mem.open-twice-refcounted"));
        for bad in [
            "hip.mem.open-returns-base,,ascend.ipc-key.trustlist-required",
            "hip.mem.open-returns-bas",
            "ascend.param.null-pointer",
            "hip.vmm.args-valid",
        ] {
            assert_eq!(
                err_var(config(&[(ENV_BREAK_RULE, bad)])),
                ENV_BREAK_RULE,
                "{bad}"
            );
        }
    }

    #[test]
    fn device_views() {
        let c = config(&[]).unwrap();
        assert_eq!(c.ascend_phy_ids, None);
        assert_eq!(c.ascend_set_access_ids, AscendIdSpace::User);
        assert_eq!(c.visibility, VisibilityEnv::default());
        let c = config(&[
            (ENV_DEVICES, "8"),
            (ENV_ASCEND_PHY_IDS, "4, 5,6,7"),
            (ENV_ASCEND_SET_ACCESS_IDS, "logical"),
            (ENV_HIP_VISIBLE_DEVICES, ""),
            (ENV_ROCR_VISIBLE_DEVICES, "GPU-1"),
            (ENV_ASCEND_RT_VISIBLE_DEVICES, "3,2"),
        ])
        .unwrap();
        assert_eq!(c.ascend_phy_ids, Some(vec![4, 5, 6, 7]));
        assert_eq!(c.ascend_set_access_ids, AscendIdSpace::Logical);
        // The vendors' variables keep an empty value: it means something to them.
        assert_eq!(c.visibility.hip.as_deref(), Some(""));
        assert_eq!(c.visibility.rocr.as_deref(), Some("GPU-1"));
        assert_eq!(c.visibility.cuda, None);
        assert_eq!(c.visibility.ascend_rt.as_deref(), Some("3,2"));
        // An empty DEVIPC_EMU_ASCEND_PHY_IDS is unset, like the other DEVIPC_EMU_* variables.
        assert_eq!(
            config(&[(ENV_ASCEND_PHY_IDS, "")]).unwrap().ascend_phy_ids,
            None
        );
        for bad in ["2", "0,0", "0,x", "-1", "0,,1"] {
            assert_eq!(
                err_var(config(&[(ENV_ASCEND_PHY_IDS, bad)])),
                ENV_ASCEND_PHY_IDS,
                "{bad}"
            );
        }
        assert_eq!(
            err_var(config(&[(ENV_ASCEND_SET_ACCESS_IDS, "physical")])),
            ENV_ASCEND_SET_ACCESS_IDS
        );
    }

    #[test]
    fn hip_versions() {
        let v = HipVersion::parse("6.2.41133").unwrap();
        assert_eq!(v.encoded(), 60_241_133);
        assert_eq!((v.major(), v.minor(), v.patch()), (6, 2, 41133));
        assert_eq!(v.to_string(), "6.2.41133");
        assert!(v.at_least(6, 0) && v.at_least(5, 6) && !v.at_least(6, 3));
        assert_eq!(HipVersion::parse("5.7").unwrap().encoded(), 50_700_000);
        for bad in [
            "6",
            "6.",
            ".2",
            "6.2.3.4",
            "a.b",
            "6.100",
            "0.1",
            "6.-1",
            "6.2.100000",
            "+6.2",
            "6 .2",
        ] {
            assert!(HipVersion::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn mem_limits() {
        assert_eq!(parse_mem_limit("4096").unwrap(), 4096);
        assert_eq!(parse_mem_limit("1K").unwrap(), 1024);
        assert_eq!(parse_mem_limit("2gib").unwrap(), 2 << 30);
        assert_eq!(parse_mem_limit("3 M").ok(), None);
        for bad in [
            "",
            "0",
            "K",
            "1X",
            "-1",
            "99999999999999999999",
            "16777216T",
        ] {
            assert!(parse_mem_limit(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn bad_values_name_the_variable() {
        assert_eq!(err_var(config(&[(ENV_DIR, "relative/dir")])), ENV_DIR);
        assert_eq!(err_var(config(&[(ENV_DEVICES, "two")])), ENV_DEVICES);
        assert_eq!(err_var(config(&[(ENV_DEVICES, "65")])), ENV_DEVICES);
        assert_eq!(
            err_var(config(&[(ENV_HIP_VERSION, "six")])),
            ENV_HIP_VERSION
        );
        assert_eq!(err_var(config(&[(ENV_MEM_LIMIT, "lots")])), ENV_MEM_LIMIT);
        assert_eq!(
            err_var(config(&[(ENV_BREAK_RULE, "Bad Rule")])),
            ENV_BREAK_RULE
        );
        assert_eq!(err_var(config(&[(ENV_BREAK_RULE, ".x")])), ENV_BREAK_RULE);
        let msg = config(&[(ENV_DEVICES, "two")]).unwrap_err().to_string();
        assert!(
            msg.contains("DEVIPC_EMU_DEVICES") && msg.contains("\"two\""),
            "{msg}"
        );
    }

    #[test]
    fn non_utf8_is_an_error() {
        use std::os::unix::ffi::OsStringExt;
        let r = Config::from_lookup(|k| (k == ENV_DEVICES).then(|| OsString::from_vec(vec![0xff])));
        assert_eq!(err_var(r), ENV_DEVICES);
    }
}
