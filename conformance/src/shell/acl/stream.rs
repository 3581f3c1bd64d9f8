//! ACL shell commands for streams (`aclrt*Stream`), with their [`Acl`] client calls.
//! Streams travel as numbers; a notify or event command on "the default stream" passes
//! NULL.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{Acl, AclCommand, AclShell, ptr};
use crate::shell::{Exec, Failure, Reply, done, value};

/// A stream command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum StreamCommand {
    /// `aclrtCreateStream`: the stream.
    Create,
    /// `aclrtSynchronizeStream`.
    Sync {
        /// The stream.
        stream: u64,
    },
    /// `aclrtDestroyStream`.
    Destroy {
        /// The stream.
        stream: u64,
    },
}

impl From<StreamCommand> for AclCommand {
    fn from(c: StreamCommand) -> Self {
        AclCommand::Stream(c)
    }
}

impl AclShell {
    /// Runs a [`StreamCommand`].
    pub(super) fn stream(&mut self, command: StreamCommand) -> Reply {
        let api = Arc::clone(&self.api);
        // SAFETY: the out-pointer points at a live local; streams are values this shell
        // got from the runtime (the runtime validates them).
        unsafe {
            match command {
                StreamCommand::Create => {
                    let mut s = std::ptr::null_mut();
                    self.check("aclrtCreateStream", (api.aclrtCreateStream)(&mut s))?;
                    value(s as usize as u64)
                }
                StreamCommand::Sync { stream } => self
                    .check(
                        "aclrtSynchronizeStream",
                        (api.aclrtSynchronizeStream)(ptr(stream)),
                    )
                    .and_then(|()| done()),
                StreamCommand::Destroy { stream } => self
                    .check("aclrtDestroyStream", (api.aclrtDestroyStream)(ptr(stream)))
                    .and_then(|()| done()),
            }
        }
    }
}

impl<E: Exec<AclCommand>> Acl<E> {
    /// `aclrtCreateStream`: the stream.
    pub fn stream_create(&mut self) -> Result<u64, Failure> {
        self.0.ask(StreamCommand::Create)
    }

    /// `aclrtSynchronizeStream`.
    pub fn stream_sync(&mut self, stream: u64) -> Result<(), Failure> {
        self.0.ask(StreamCommand::Sync { stream })
    }

    /// `aclrtDestroyStream`.
    pub fn stream_destroy(&mut self, stream: u64) -> Result<(), Failure> {
        self.0.ask(StreamCommand::Destroy { stream })
    }
}
