//! devipc conformance suite: the rule catalogue and its runner.
//!
//! Filled by the conformance issue: one rule per documented vendor rule or devipc
//! guarantee, multi-process scenarios, and a runner that reports per backend.
