//! [`Ctx`]: what a scenario gets: the target, its probe, the rule, and ways to reach the
//! runtime here and in peers.
//!
//! A scenario runs in its own child process (a "rule child"). Through the context it
//! opens the vendor table in this process ([`Ctx::acl`], [`Ctx::hip`]) or the devipc
//! facade ([`Ctx::runtime`], or [`Ctx::counting_runtime`] to count vendor calls), and
//! starts peers running the same shells in other processes ([`Ctx::acl_peer`],
//! [`Ctx::hip_peer`], [`Ctx::facade_peer`]). It also judges vendor refusals against the
//! rule's [`Expect`] ([`Ctx::refused`]).
//!
//! Memory scenarios allocate through [`Ctx::allocate`] (or [`Ctx::allocate_raw`]), which
//! follows the target's allocation ([`Target::allocation`]: the default, or e.g.
//! `hip-vmm-fd` on `emulated-hip-vmm`), as the facade peers' `alloc` does, and show every
//! token they share to [`Ctx::shares`], which checks it is of the run's mechanism and
//! records it for the report.

use std::ffi::OsString;
use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use devipc::raw::{Allocation, Backend, DeviceIpc, Mechanism};
use devipc::{DeviceId, MemToken, Runtime, SharedBuffer};
use devipc_ascend::AscendBackend;
use devipc_ascend_sys::AclApi;
use devipc_core::{BackendKind, RuntimeVersion};
use devipc_hip::HipBackend;
use devipc_hip_sys::HipApi;

use crate::capabilities::Probe;
use crate::counting;
use crate::rule::{Expect, Rule, Stop, Verdict};
use crate::shell::acl::{Acl, AclPeer, AclShell};
use crate::shell::facade::{Facade, FacadePeer};
use crate::shell::hip::{Hip, HipPeer, HipShell};
use crate::shell::{Failure, Local, Remote};
use crate::target::Target;

/// Peer role names (the `__role` argument).
pub mod roles {
    /// A peer running the ACL shell.
    pub const ACL_SHELL: &str = "acl-shell";
    /// A peer running the HIP shell.
    pub const HIP_SHELL: &str = "hip-shell";
    /// A peer running the facade shell.
    pub const FACADE_SHELL: &str = "facade-shell";
    /// A peer running the facade shell on a counting vendor table.
    pub const COUNTING_FACADE_SHELL: &str = "counting-facade-shell";
}

/// Everything a scenario works with.
#[derive(Debug)]
pub struct Ctx {
    /// The backend under test.
    pub target: Target,
    /// What it offers.
    pub probe: Probe,
    /// The rule being checked.
    pub rule: &'static Rule,
    /// How long a peer may take to answer one command.
    pub reply_timeout: Duration,
    /// The mechanisms of the tokens the scenario shared ([`Ctx::shares`]), in first-seen
    /// order.
    mechanisms: Vec<Mechanism>,
}

/// The vendor table of `target` for this process: the emulator's, or the discovered
/// vendor library.
pub fn acl_table(target: Target) -> Result<AclApi, String> {
    if target.emulated() {
        Ok(devipc_emulator::acl::acl_api())
    } else {
        AclApi::discover().map_err(|e| e.to_string())
    }
}

/// As [`acl_table`], for HIP.
pub fn hip_table(target: Target) -> Result<HipApi, String> {
    if target.emulated() {
        Ok(devipc_emulator::hip::hip_api())
    } else {
        HipApi::discover().map_err(|e| e.to_string())
    }
}

/// The facade runtime of `target`, on a counting table when `counting` (see
/// [`crate::counting`]).
pub fn facade_runtime(target: Target, counting: bool) -> Result<Runtime, String> {
    if !counting {
        return Runtime::from_choice(target.choice()).map_err(|e| e.to_string());
    }
    let backend = match target.kind() {
        BackendKind::Ascend => {
            let mut api = acl_table(target)?;
            counting::wrap_acl(&mut api)?;
            Backend::from(AscendBackend::from_api(Arc::new(api)).map_err(|e| e.to_string())?)
        }
        _ => {
            let mut api = hip_table(target)?;
            counting::wrap_hip(&mut api)?;
            Backend::from(HipBackend::from_api(Arc::new(api)).map_err(|e| e.to_string())?)
        }
    };
    Ok(Runtime::from_backend(backend))
}

impl Ctx {
    /// A context for `rule` on `target`.
    pub fn new(target: Target, probe: Probe, rule: &'static Rule, reply_timeout: Duration) -> Ctx {
        Ctx {
            target,
            probe,
            rule,
            reply_timeout,
            mechanisms: Vec::new(),
        }
    }

    /// Allocates `size` bytes on `device` through the facade the way the target says:
    /// `Runtime::allocate` (the backend's default), or `Runtime::allocate_with` the
    /// target's mechanism on an allocation variant.
    pub fn allocate(
        &self,
        rt: &Runtime,
        device: DeviceId,
        size: usize,
    ) -> devipc::Result<SharedBuffer> {
        match self.target.allocation() {
            None => rt.allocate(device, size),
            Some(_) => rt.allocate_with(device, size, self.target.allocate_options()),
        }
    }

    /// As [`Ctx::allocate`], through the raw backend (`DeviceIpc::allocate[_with]`).
    pub fn allocate_raw(
        &self,
        backend: &Backend,
        device: DeviceId,
        size: usize,
    ) -> devipc::Result<Allocation> {
        match self.target.allocation() {
            None => backend.allocate(device, size),
            Some(_) => backend.allocate_with(device, size, self.target.allocate_options()),
        }
    }

    /// Records that the scenario shares `token` (for the report), and fails unless it is
    /// of the mechanism the target allocates for: a variant run that quietly fell back to
    /// the default mechanism must not pass.
    pub fn shares(&mut self, token: &MemToken) -> Result<(), Stop> {
        let m = token.mechanism();
        if !self.mechanisms.contains(&m) {
            self.mechanisms.push(m);
        }
        match self.target.allocation() {
            Some(want) if want != m => Err(Stop::fail(format!(
                "the {} run allocates for {want}, but the token is {m}",
                self.target
            ))),
            _ => Ok(()),
        }
    }

    /// The mechanisms of the tokens the scenario shared, in first-seen order.
    pub fn mechanisms(&self) -> &[Mechanism] {
        &self.mechanisms
    }

    /// The ACL shell in this process.
    pub fn acl(&self) -> Result<Acl<Local<AclShell>>, Stop> {
        let api = acl_table(self.target).map_err(Stop::Fail)?;
        Ok(Acl(Local(AclShell::new(Arc::new(api))?)))
    }

    /// The HIP shell in this process.
    pub fn hip(&self) -> Result<Hip<Local<HipShell>>, Stop> {
        let api = hip_table(self.target).map_err(Stop::Fail)?;
        Ok(Hip(Local(HipShell::new(Arc::new(api)))))
    }

    /// The facade runtime in this process.
    pub fn runtime(&self) -> Result<Runtime, Stop> {
        facade_runtime(self.target, false).map_err(Stop::Fail)
    }

    /// The facade runtime in this process, on a counting vendor table (see
    /// [`crate::counting`]); at most once per process.
    pub fn counting_runtime(&self) -> Result<Runtime, Stop> {
        facade_runtime(self.target, true).map_err(Stop::Fail)
    }

    fn peer<C: serde::Serialize>(&self, name: &str, role: &str) -> Result<Remote<C>, Stop> {
        let env: Vec<(String, OsString)> = Vec::new();
        Remote::spawn(name, role, self.target.name(), &env, self.reply_timeout).map_err(Stop::from)
    }

    /// A peer process running the ACL shell.
    pub fn acl_peer(&self, name: &str) -> Result<AclPeer, Stop> {
        self.peer(name, roles::ACL_SHELL).map(Acl)
    }

    /// A peer process running the HIP shell.
    pub fn hip_peer(&self, name: &str) -> Result<HipPeer, Stop> {
        self.peer(name, roles::HIP_SHELL).map(Hip)
    }

    /// On the emulator, a peer process running the HIP shell with the emulator answering
    /// as HIP `version` (`DEVIPC_EMU_HIP_VERSION`), whatever the run emulates: lets a rule
    /// whose behaviour changes at a release check both sides of the cut-off in one run.
    /// On a real runtime the version is the installed one; this fails there.
    pub fn hip_peer_emulating(&self, name: &str, version: &str) -> Result<HipPeer, Stop> {
        if !self.target.emulated() {
            return Err(Stop::fail(format!(
                "{name}: only the emulator can answer as another HIP version ({version})"
            )));
        }
        let env = [(
            devipc_emulator::config::ENV_HIP_VERSION.to_owned(),
            OsString::from(version),
        )];
        Remote::spawn(
            name,
            roles::HIP_SHELL,
            self.target.name(),
            &env,
            self.reply_timeout,
        )
        .map(Hip)
        .map_err(Stop::from)
    }

    /// A peer process running the HIP shell with extra environment variables (issue 16:
    /// the vendors' visibility masks, which the runtime reads when the peer starts).
    pub fn hip_peer_env(&self, name: &str, env: &[(&str, &str)]) -> Result<HipPeer, Stop> {
        self.peer_env(name, roles::HIP_SHELL, env).map(Hip)
    }

    /// A peer process running the ACL shell with extra environment variables (issue 16).
    pub fn acl_peer_env(&self, name: &str, env: &[(&str, &str)]) -> Result<AclPeer, Stop> {
        self.peer_env(name, roles::ACL_SHELL, env).map(Acl)
    }

    fn peer_env<C: serde::Serialize>(
        &self,
        name: &str,
        role: &str,
        env: &[(&str, &str)],
    ) -> Result<Remote<C>, Stop> {
        let env: Vec<(String, OsString)> = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), OsString::from(v)))
            .collect();
        Remote::spawn(name, role, self.target.name(), &env, self.reply_timeout).map_err(Stop::from)
    }

    /// A peer process running the facade shell (on a counting table if `counting`).
    pub fn facade_peer(&self, name: &str, counting: bool) -> Result<FacadePeer, Stop> {
        let role = if counting {
            roles::COUNTING_FACADE_SHELL
        } else {
            roles::FACADE_SHELL
        };
        self.peer(name, role).map(Facade)
    }

    /// A peer process running the facade shell with extra environment variables (e.g. a
    /// device visibility mask).
    pub fn facade_peer_with_env(
        &self,
        name: &str,
        env: &[(String, OsString)],
    ) -> Result<FacadePeer, Stop> {
        Remote::spawn(
            name,
            roles::FACADE_SHELL,
            self.target.name(),
            env,
            self.reply_timeout,
        )
        .map(Facade)
        .map_err(Stop::from)
    }

    /// The runtime version the probe found.
    pub fn version(&self) -> Option<RuntimeVersion> {
        self.probe.version
    }

    /// The violations the strict emulator recorded so far in this rule's state directory
    /// (`rule=<id> pid=<pid> object=<id> <what>` lines), removed so the runner does not
    /// count them as left behind: for emulator-only rules that provoke one on purpose.
    /// Empty on a real runtime.
    pub fn take_violations(&self) -> Vec<String> {
        if !self.target.emulated() {
            return Vec::new();
        }
        let Some(dir) = std::env::var_os("DEVIPC_EMU_DIR") else {
            return Vec::new();
        };
        let path = std::path::Path::new(&dir).join(devipc_emulator::state::violations::VIOLATIONS);
        let lines = std::fs::read_to_string(&path)
            .map(|t| t.lines().map(str::to_owned).collect())
            .unwrap_or_default();
        let _ = std::fs::remove_file(&path);
        lines
    }

    /// Judges a provoked violation of the rule being checked (emulator-only rules): the
    /// victim's `access` after the release point must have failed (with `code` when given),
    /// and the emulator must have recorded a violation of the rule (`recorded`, from
    /// [`Ctx::take_violations`]). Returns what was seen.
    pub fn violation_seen<T>(
        &self,
        what: &str,
        access: Result<T, Failure>,
        code: Option<i32>,
        recorded: &[String],
    ) -> Verdict {
        let failure = match access {
            Ok(_) => {
                return Err(Stop::fail(format!(
                    "{what}: the access after the release point succeeded; the violation went \
                     unnoticed (recorded: {recorded:?})"
                )));
            }
            Err(f) => f,
        };
        if let (Some(want), Failure::Vendor { code: got, .. }) = (code, &failure)
            && *got != want
        {
            return Err(Stop::fail(format!(
                "{what}: the access failed with {got}, not {want}: {failure}"
            )));
        }
        let tag = format!("rule={} ", self.rule.id);
        if !recorded.iter().any(|v| v.starts_with(&tag)) {
            return Err(Stop::fail(format!(
                "{what}: no violation of {} was recorded: {recorded:?}",
                self.rule.id
            )));
        }
        Ok(format!(
            "{what}: the access failed ({failure}) and the violation was recorded"
        ))
    }

    /// Judges a call the rule says must be refused: it must fail with a vendor code, the
    /// rule's code when the rule documents one; on the emulator the refusal must name this
    /// rule when the emulator enforces a rule of the same id (so a different check cannot
    /// pass for it). Returns the observation.
    pub fn refused<T: Debug>(&self, what: &str, result: Result<T, Failure>) -> Verdict {
        let tag = crate::catalogue::emulator_enforces(self.rule.id).then_some(self.rule.id);
        self.judge_refusal(what, self.rule.expect, tag, result)
    }

    /// Judges a refusal by another emulator rule than the rule's own id, one of the
    /// switches it lists in [`Rule::catches`] (e.g. a behaviour rule that also shows a
    /// documented refusal): any vendor code passes (the report shows which), and on the
    /// emulator the refusal must name `emulator_rule`.
    pub fn refused_as<T: Debug>(
        &self,
        what: &str,
        emulator_rule: &str,
        result: Result<T, Failure>,
    ) -> Verdict {
        debug_assert!(self.rule.id == emulator_rule || self.rule.catches.contains(&emulator_rule));
        self.judge_refusal(what, Expect::Refused, Some(emulator_rule), result)
    }

    fn judge_refusal<T: Debug>(
        &self,
        what: &str,
        expect: Expect,
        emulator_rule: Option<&str>,
        result: Result<T, Failure>,
    ) -> Verdict {
        let (api, code, message) = match result {
            Ok(v) => {
                return Err(Stop::fail(format!(
                    "{what} succeeded ({v:?}), but the rule says it is refused"
                )));
            }
            Err(Failure::Vendor { api, code, message }) => (api, code, message),
            Err(other) => return Err(Stop::fail(format!("{what}: {other}"))),
        };
        let name = code_name(self.target.kind(), code);
        if let Expect::Code(want_name, want) = expect
            && code != want
        {
            return Err(Stop::fail(format!(
                "{what}: {api} returned {name} ({code}), the rule expects {want_name} ({want}); \
                 message: {message}"
            )));
        }
        if let Some(id) = emulator_rule
            && self.target.emulated()
        {
            let tag = format!("[rule {id}]");
            if !message.contains(&tag) {
                return Err(Stop::fail(format!(
                    "{what}: refused with {name} ({code}) by another check than {tag}: {message}"
                )));
            }
        }
        Ok(format!("{what}: {api} -> {name} ({code})"))
    }
}

/// The vendor's name for `code` (devipc's tables), or `code <n>`.
pub fn code_name(kind: BackendKind, code: i32) -> String {
    let name = match kind {
        BackendKind::Ascend => devipc_ascend_sys::error_name(code),
        _ => devipc_hip_sys::error_name(code),
    };
    name.map_or_else(|| format!("code {code}"), str::to_owned)
}
