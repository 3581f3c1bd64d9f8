//! How the runner starts its children: this program re-executed in a child role, on
//! `devipc-child` (processes, the `@@` line protocol, deadlines, kills).
//!
//! The runner starts one child per backend to probe it and one per rule to run the
//! scenario; a scenario starts peers (further children) for the other side of a
//! cross-process rule. All are the same binary started as `devipc-conformance __role
//! <role> ...` ([`crate::child`] dispatches). The child's stderr is kept (its tail goes
//! into a failure's detail). A child that does not answer in time is killed (with its
//! process group when it leads one, so its own peers die too) and reported as a failure,
//! never as a pass.

use std::ffi::OsString;
use std::time::Duration;

use devipc_child::{Child, Command};

/// First argument of a child invocation: `devipc-conformance __role <role> ...`.
pub const ROLE_ARG: &str = "__role";
/// How much of a child's stderr a report keeps (the tail).
const STDERR_KEEP: usize = 4000;
/// On drop, a child gets this long to exit at the end of its input (a shell releases
/// what it holds) before it is killed.
const DROP_GRACE: Duration = Duration::from_secs(2);

/// Starts `current_exe __role <args...>` as the child `name`, with `env` on top of this
/// process's environment. `new_group` makes the child lead a new process group (the
/// runner's rule children), so killing it also kills the peers it started.
pub fn spawn(
    name: &str,
    args: &[&str],
    env: &[(String, OsString)],
    new_group: bool,
) -> Result<Child, String> {
    let mut cmd = Command::new(name)
        .map_err(|e| format!("current_exe: {e}"))?
        .arg(ROLE_ARG)
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .capture_stderr(STDERR_KEEP)
        .grace_on_drop(DROP_GRACE);
    if new_group {
        cmd = cmd.new_process_group();
    }
    cmd.spawn()
        .map_err(|e| format!("starting child `{name}`: {e}"))
}
