//! devipc's child-process harness: this program re-run as a child in a named role, spoken
//! to over its stdin/stdout, with a deadline on every wait.
//!
//! devipc's behaviour across processes is checked with real processes, and every place
//! that needs a second process starts it the same way: the integration tests (through
//! `devipc-testkit`), the conformance runner and its peers, the doctor's two-process
//! check (`devipc doctor`) and the benchmark's peers. The parent builds a [`Command`]
//! (the role goes in arguments or the environment, as the program dispatches), spawns a
//! [`Child`] and exchanges lines with it: the child sends messages `@@ <key> <value>`
//! ([`say`]), the parent sends plain lines that the child reads with [`hear`] (the
//! protocol is in [`wire`]). A wait that runs out kills the child and says so; so does a
//! line sent to a child that does not read it ([`Command::send_timeout`]); a child that
//! says `@@ fail <reason>` fails [`Child::expect`]; the child's stderr is passed through or
//! kept (its tail) for error messages ([`Command::capture_stderr`]).
//!
//! The parent's memory and waits stay bounded whatever the child does: a line of its
//! stdout is held up to [`MAX_LINE`] bytes (a longer message is an error, longer noise is
//! dropped), messages read ahead are bounded in bytes, and once the child has ended no
//! read waits for the end of a pipe that a process it started still holds. A child that
//! leads its own process group ([`Command::new_process_group`]) takes the group with it
//! when it ends.
//!
//! Parent side:
//! ```no_run
//! # use std::time::Duration;
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut child = devipc_child::Command::new("importer")?
//!     .arg("__role")
//!     .arg("importer")
//!     .capture_stderr(4000)
//!     .spawn()?;
//! let pid = child.expect("pid", Duration::from_secs(10))?;
//! child.send("token devipc3:...")?;
//! child.finish(Duration::from_secs(10))?;
//! # Ok(()) }
//! ```
//! Child side:
//! ```no_run
//! # use std::time::Duration;
//! devipc_child::start_watchdog(Duration::from_secs(60), "importer: giving up".into());
//! let ok = devipc_child::run_role("importer", || -> Result<(), String> {
//!     devipc_child::say("pid", &std::process::id().to_string());
//!     let token = devipc_child::hear().ok_or("no token")?;
//!     Ok(())
//! });
//! std::process::exit(if ok { 0 } else { 1 });
//! ```
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod wire;

pub use wire::{WATCHDOG_EXIT, hear, run_role, say, start_watchdog};

mod child;
mod command;
mod error;
mod pipes;
#[cfg(test)]
mod tests;

pub use child::Child;
pub use command::{Command, OtherMessages};
pub use error::{ChildError, describe_status};

use std::time::Duration;

/// A timeout that never runs out: the wait blocks until the child answers or exits.
pub const FOREVER: Duration = Duration::MAX;

/// The longest line of the child's stdout the parent holds, in bytes (1 MiB). A longer
/// message is refused ([`ChildError::MessageTooLong`]); a longer line that is not a
/// message is dropped (only its first `MAX_LINE` bytes are ever held).
pub const MAX_LINE: usize = 1 << 20;

/// How long [`Child::send`] waits, by default, for the child to take a line it does not
/// read (see [`Command::send_timeout`]).
pub const DEFAULT_SEND_TIMEOUT: Duration = Duration::from_secs(60);

/// How long [`Child::next`] waits for a child that closed its stdout to exit, to say how
/// it ended.
pub(crate) const EXIT_GRACE: Duration = Duration::from_secs(5);

/// At most this many bytes of messages wait, read but not yet received, before the
/// reader stops reading the child's stdout (the child then blocks writing it); one
/// message is always let through, however long.
pub(crate) const INBOX_BYTES: usize = 16 << 20;

/// How often a wait looks whether the child ended, and how long a reader of its pipes
/// waits for more output once it has.
pub(crate) const POLL_SLICE: Duration = Duration::from_millis(50);

/// How long [`Child::stderr`] waits, after the child was reaped, for the rest of its
/// stderr; a descendant that still holds the pipe does not make it wait longer.
pub(crate) const STDERR_DRAIN: Duration = Duration::from_secs(2);

/// One message `@@ <key> <value>`, as `(key, value)`.
pub type Message = (String, String);
