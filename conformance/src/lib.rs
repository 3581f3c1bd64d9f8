//! devipc conformance suite: each vendor's documented IPC rules and devipc's portable
//! guarantees, as data plus scenarios, run per backend.
//!
//! This is what a framework runs on each machine it ships on: `devipc-conformance
//! --backend hip` on an AMD machine checks the real HIP runtime against the rules devipc
//! relies on (`--backend hip-vmm`: the memory rules again on `hip-vmm-fd` memory); with no
//! argument it checks both emulated backends, and emulated HIP's `hip-vmm-fd` memory
//! (`emulated-hip-vmm`). It sits on top of every other crate: vendor rules call the raw
//! function tables (`AclApi`, `HipApi`) of the backends, portable rules the `devipc`
//! facade.
//!
//! | module | role |
//! |---|---|
//! | [`rule`] | the rule model: id, level, applies, source, expect, needs, scenario |
//! | [`catalogue`] | every rule ([`catalogue::ascend`], [`catalogue::hip`], [`catalogue::portable`](mod@catalogue::portable)) |
//! | [`target`] | the backends a run can check, and the allocation variants (`emulated-hip-vmm`) |
//! | [`capabilities`] | capability discovery: what a backend offers on this machine (devices, version, peer access) |
//! | [`runner`] | probe, needs, one child process per rule with a deadline, state checks |
//! | [`report`] | the table and the `--json` document (schema documented there) |
//! | [`cli`] | the command line |
//! | [`child`] | the child roles the runner re-executes itself in |
//! | [`process`] | starting the child processes (on `devipc-child`: `@@` lines, timeouts) |
//! | [`shell`] | one call per typed command, locally or in a peer: the ACL, HIP and facade shells |
//! | [`counting`] | vendor tables that count calls (for "no vendor call" guarantees) |
//! | [`ctx`] | what a scenario works with |
//! | [`switches`] | the emulator's rule switches and the catalogue rules bearing on each |
//!
//! A rule whose needs are unmet is skipped with the reason; a child that hangs or
//! crashes is a failure with its stderr; nothing turns "could not run" into "passed".

pub mod capabilities;
pub mod catalogue;
pub mod child;
pub mod cli;
pub mod counting;
pub mod ctx;
pub mod process;
pub mod report;
pub mod rule;
pub mod runner;
pub mod shell;
pub mod switches;
pub mod target;
