//! What the emulator's multi-process tests check on top of `devipc_testkit`: the state
//! directory of a [`TestRoot`] seen through an explicit [`State`] (never
//! `State::global`), its ledger, and the identity of a child as holders record it.
//!
//! The children find that directory through the real `DEVIPC_EMU_DIR`, which
//! [`TestRoot`] gives every child it starts ([`TestRoot::emu_dir`]); they run the
//! `child_role` test of the module that starts them ([`child_entry`]).

use devipc_emulator::rules::RuleInfo;
use devipc_emulator::state::gc::needs_gc;
use devipc_emulator::state::{ProcessIdentity, Violation, violations};
use devipc_emulator::{Config, State};
use devipc_testkit::{Child, TestRoot};

/// The emulator's view of a test root.
pub trait EmuRoot {
    /// The configuration of the state directory the children use.
    fn config(&self) -> Config;

    /// The state directory, opened by the parent for inspection.
    fn state(&self) -> State;

    /// Bytes in use on `device` across all processes, read from the ledger (whatever
    /// device count the children were given).
    fn used(&self, device: u32) -> u64;

    /// Number of objects (`<id>.meta` files) in the state directory.
    fn objects(&self) -> usize;

    /// The violations recorded in the state directory, oldest first.
    fn violations(&self) -> Vec<Violation>;

    /// The state directory holds only the ledger and no memory is accounted.
    fn assert_clean(&self);
}

impl EmuRoot for TestRoot {
    fn config(&self) -> Config {
        Config::for_dir(self.emu_dir())
    }

    fn state(&self) -> State {
        State::open(self.config()).unwrap()
    }

    fn used(&self, device: u32) -> u64 {
        self.state().registry().ledger_snapshot().unwrap().used[device as usize]
    }

    fn objects(&self) -> usize {
        self.state()
            .dir()
            .entry_names()
            .unwrap()
            .iter()
            .filter(|n| n.ends_with(".meta"))
            .count()
    }

    fn violations(&self) -> Vec<Violation> {
        violations::read(self.state().dir()).unwrap()
    }

    fn assert_clean(&self) {
        assert_state_clean(&self.state());
    }
}

/// `state`'s directory holds only the ledger and no memory is accounted.
pub fn assert_state_clean(state: &State) {
    let mut names = state.dir().entry_names().unwrap();
    names.sort();
    assert_eq!(
        names,
        ["ledger"],
        "leftover files in the state directory (violations: {:?})",
        violations::read(state.dir()).unwrap()
    );
    let used = state.registry().ledger_snapshot().unwrap().used;
    assert!(
        used.iter().all(|u| *u == 0),
        "memory still accounted: {used:?}"
    );
}

/// The entry test of a child started from the calling code: `<module>::child_role` (see
/// [`devipc_testkit::child_entry`]; each topic module is one file named after the module,
/// see `main.rs`). The harnesses' `spawn` functions are `#[track_caller]`, so this names
/// the module of the test that starts the child.
pub use devipc_testkit::child_entry;

/// The live child's identity as holders record it.
pub fn identity(child: &Child) -> ProcessIdentity {
    ProcessIdentity::of_pid(child.pid() as i32)
        .unwrap()
        .unwrap()
}

/// After the exited processes' liveness beacons are swept (as the next process would),
/// `state` holds no object or hold of a dead process: only what live processes hold.
pub fn assert_no_dead_holders(state: &State) {
    devipc_shm::liveness::sweep(state.dir().path()).unwrap();
    assert!(
        !needs_gc(state.registry()).unwrap(),
        "a dead process's object or hold is left: {:?}",
        state.dir().entry_names().unwrap()
    );
}

/// `bytes` as lowercase hex, two digits a byte (handles and UUIDs as the shells print
/// them).
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Parses 128 hex digits (or anything else, padded/truncated, for garbage handles).
pub fn unhex64(text: &str) -> [u8; 64] {
    let mut out = [0u8; 64];
    for (i, slot) in out.iter_mut().enumerate() {
        *slot = text
            .get(2 * i..2 * i + 2)
            .and_then(|h| u8::from_str_radix(h, 16).ok())
            .unwrap_or(0);
    }
    out
}

/// The byte pattern both sides of a transfer agree on (the ACL and HIP shells).
pub fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed ^ (i >> 8) as u8)
        .collect()
}

/// The rules of both surfaces that `DEVIPC_EMU_BREAK_RULE` cannot switch off.
pub fn unswitchable_rules() -> Vec<&'static RuleInfo> {
    let acl = devipc_emulator::acl::rules::ALL;
    let hip = devipc_emulator::hip::rules::ALL;
    acl.iter().chain(hip).filter(|r| !r.breakable).collect()
}

/// The configuration error for `DEVIPC_EMU_BREAK_RULE=<value>` where `value` names `id`,
/// a rule that cannot be switched off: the same for both surfaces, whichever vendor the
/// rule is of.
pub fn unswitchable_refusal(value: &str, id: &str) -> String {
    format!(
        "invalid DEVIPC_EMU_BREAK_RULE={value:?}: `{id}` cannot be switched off: without it the \
         emulator itself would do what the vendor refuses (dereference NULL, address a missing \
         device or object, copy out of bounds)"
    )
}

/// Reads a configuration with `DEVIPC_EMU_BREAK_RULE=<value>` (and nothing else set): the
/// error, which a rule that cannot be switched off must give.
pub fn break_rule_config_error(value: &str) -> String {
    let config =
        Config::from_lookup(|name| (name == "DEVIPC_EMU_BREAK_RULE").then(|| value.into()));
    match config {
        Ok(_) => panic!("DEVIPC_EMU_BREAK_RULE={value:?} was accepted"),
        Err(e) => e.to_string(),
    }
}
