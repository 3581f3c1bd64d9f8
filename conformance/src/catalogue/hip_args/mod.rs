//! HIP vendor rules added for mutation completeness (issue 11): emulator rules no
//! catalogue rule checked before. Each reuses the emulator's rule id and makes the same
//! call with the rule satisfied as a positive control.
//!
//! One file per topic, each with its table and scenarios, as in [`super::ascend_args`];
//! [`TABLES`] lists them in report order: `stream.rs` (stream waits on events).

mod stream;

use crate::rule::{Applies, Rule};

const H: Applies = Applies::Hip;

/// The HIP argument rules, table by table in report order.
pub static TABLES: &[&[Rule]] = &[stream::RULES];
