//! [`ChildError`]: why talking to a child failed, and how an exit status reads.

#[cfg(doc)]
use crate::{Child, MAX_LINE, OtherMessages};
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::Duration;

/// Why talking to a child failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChildError {
    /// Nothing arrived in time; the child was killed.
    Timeout(Duration),
    /// The child closed its stdout (exited or crashed) first; how it ended.
    Exited(String),
    /// The child said `@@ fail <reason>` ([`Child::expect`] only).
    Failed(String),
    /// The child said another message (with [`OtherMessages::Refuse`]).
    Unexpected {
        /// The message's key.
        key: String,
        /// The message's value.
        value: String,
    },
    /// The child's stdin was already closed.
    StdinClosed,
    /// The child did not take a line sent to it within the send timeout (it does not read
    /// its stdin and the pipe is full); the child was killed.
    SendTimeout(Duration),
    /// The child wrote a message line longer than [`MAX_LINE`] (`limit`) bytes; it was
    /// skipped, the child left running.
    MessageTooLong {
        /// The message's key (its first 100 bytes).
        key: String,
        /// The longest line held, in bytes.
        limit: usize,
    },
    /// Writing to the child's stdin failed (the OS error).
    Write(String),
}

impl ChildError {
    /// A sentence for an error message, naming the child and what was waited for.
    pub fn describe(&self, child: &str, waiting_for: &str) -> String {
        match self {
            ChildError::Timeout(t) => format!(
                "child `{child}` did not answer ({waiting_for}) within {:.1}s and was killed",
                t.as_secs_f64()
            ),
            ChildError::Exited(how) => {
                format!("child `{child}` ended before answering ({waiting_for}): {how}")
            }
            ChildError::Failed(why) => format!("child `{child}` failed ({waiting_for}): {why}"),
            ChildError::Unexpected { key, value } => {
                format!("child `{child}` said `{key} {value}` instead of {waiting_for}")
            }
            ChildError::StdinClosed => format!("child `{child}`: stdin already closed"),
            ChildError::SendTimeout(t) => format!(
                "child `{child}` did not read its input ({waiting_for}) within {:.1}s and \
                 was killed",
                t.as_secs_f64()
            ),
            ChildError::MessageTooLong { key, limit } => format!(
                "child `{child}` sent a message `{key}` longer than {limit} bytes \
                 ({waiting_for})"
            ),
            ChildError::Write(e) => format!("child `{child}`: writing to child `{child}`: {e}"),
        }
    }
}

impl std::fmt::Display for ChildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChildError::Timeout(t) => write!(
                f,
                "the child did not answer within {:.1}s and was killed",
                t.as_secs_f64()
            ),
            ChildError::Exited(how) => write!(f, "the child ended before answering: {how}"),
            ChildError::Failed(why) => write!(f, "the child failed: {why}"),
            ChildError::Unexpected { key, value } => {
                write!(f, "unexpected `{key} {value}` from the child")
            }
            ChildError::StdinClosed => write!(f, "the child's stdin is closed"),
            ChildError::SendTimeout(t) => write!(
                f,
                "the child did not read its input within {:.1}s and was killed",
                t.as_secs_f64()
            ),
            ChildError::MessageTooLong { key, limit } => {
                write!(
                    f,
                    "the child sent a message `{key}` longer than {limit} bytes"
                )
            }
            ChildError::Write(e) => write!(f, "writing to the child: {e}"),
        }
    }
}

impl std::error::Error for ChildError {}

/// How a process ended, e.g. `exited with code 1` or `killed by signal 6 (SIGABRT)`.
pub fn describe_status(status: ExitStatus) -> String {
    if let Some(code) = status.code() {
        return format!("exited with code {code}");
    }
    match status.signal() {
        Some(sig) => {
            let name = match sig {
                libc::SIGABRT => " (SIGABRT)",
                libc::SIGSEGV => " (SIGSEGV)",
                libc::SIGKILL => " (SIGKILL)",
                libc::SIGBUS => " (SIGBUS)",
                libc::SIGTERM => " (SIGTERM)",
                libc::SIGILL => " (SIGILL)",
                _ => "",
            };
            format!("killed by signal {sig}{name}")
        }
        None => format!("ended with {status}"),
    }
}
