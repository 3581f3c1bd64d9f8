//! HIP shell command for `hipMemcpyBatchAsync` (issue 25), with its [`Hip`] client call.
//! The reply carries the call's status and `*failIdx` together: the rules judge both.

use std::ffi::c_void;
use std::sync::Arc;

use devipc_hip_sys::{hipMemcpyAttributes, hipSuccess};
use serde::{Deserialize, Serialize};

use super::{Hip, HipCommand, HipShell, ptr};
use crate::shell::{Exec, Failure, Reply, value};

/// What `*failIdx` holds before the call, so a rule sees whether it was written.
pub const FAIL_IDX_UNTOUCHED: u64 = 0x5eed;

/// A batch command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum BatchCommand {
    /// `hipMemcpyBatchAsync(dsts, srcs, sizes, count, attrs, NULL, numAttrs, &failIdx,
    /// stream)` with `failIdx` preset to [`FAIL_IDX_UNTOUCHED`], then (on success)
    /// `hipStreamSynchronize(stream)`.
    Copy {
        /// Destinations.
        dsts: Vec<u64>,
        /// Sources.
        srcs: Vec<u64>,
        /// Sizes.
        sizes: Vec<usize>,
        /// `count` as passed (may differ from the arrays' length).
        count: usize,
        /// Pass NULL for `dsts`.
        null_dsts: bool,
        /// `numAttrs` (one zeroed attribute array of that length is passed).
        num_attrs: usize,
        /// The stream (0: the null stream).
        stream: u64,
    },
}

/// What a batch call returned: the failure (`None`: success) and `*failIdx` after it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchReply {
    /// The call's failure.
    pub failure: Option<Failure>,
    /// `*failIdx` after the call.
    pub fail_idx: u64,
}

impl From<BatchCommand> for HipCommand {
    fn from(c: BatchCommand) -> Self {
        HipCommand::Batch(c)
    }
}

impl HipShell {
    /// Runs a [`BatchCommand`].
    pub(super) fn batch(&mut self, command: BatchCommand) -> Reply {
        let api = Arc::clone(&self.api);
        let BatchCommand::Copy {
            dsts,
            srcs,
            sizes,
            count,
            null_dsts,
            num_attrs,
            stream,
        } = command;
        let f = api
            .hipMemcpyBatchAsync
            .ok_or_else(|| Failure::harness("the HIP table lacks hipMemcpyBatchAsync"))?;
        if dsts.len() < count || srcs.len() < count || sizes.len() < count {
            return Err(Failure::harness("fewer descriptors than count"));
        }
        let mut dsts: Vec<*mut c_void> = dsts.into_iter().map(ptr).collect();
        let mut srcs: Vec<*mut c_void> = srcs.into_iter().map(ptr).collect();
        let mut sizes = sizes;
        let mut attrs = vec![hipMemcpyAttributes::default(); num_attrs.max(1)];
        let mut idxs = vec![0usize; num_attrs.max(1)];
        let mut fail_idx = FAIL_IDX_UNTOUCHED as usize;
        let d = if null_dsts {
            std::ptr::null_mut()
        } else {
            dsts.as_mut_ptr()
        };
        // SAFETY: the arrays hold at least `count` elements (checked) and live across the
        // call; `attrs` / `idxs` hold `numAttrs` (at least one); the operands are device
        // memory of this shell (or deliberately invalid, the rule under test), and the
        // stream is synchronised before the reply.
        let code = unsafe {
            f(
                d,
                srcs.as_mut_ptr(),
                sizes.as_mut_ptr(),
                count,
                attrs.as_mut_ptr(),
                idxs.as_mut_ptr(),
                num_attrs,
                &mut fail_idx,
                ptr(stream).cast(),
            )
        };
        let failure = if code == hipSuccess {
            None
        } else {
            Some(self.failure("hipMemcpyBatchAsync", code))
        };
        // SAFETY: the stream the call used (null or one this shell created).
        let synced = unsafe { (api.hipStreamSynchronize)(ptr(stream).cast()) };
        if failure.is_none() {
            self.check("hipStreamSynchronize", synced)?;
        }
        value(BatchReply {
            failure,
            fail_idx: fail_idx as u64,
        })
    }
}

impl<E: Exec<HipCommand>> Hip<E> {
    /// `hipMemcpyBatchAsync` of device-to-device descriptors on `stream`, then a stream
    /// synchronisation: the failure (if any) and `*failIdx` (preset to
    /// [`FAIL_IDX_UNTOUCHED`]).
    pub fn memcpy_batch(
        &mut self,
        descriptors: &[(u64, u64, usize)],
        num_attrs: usize,
        stream: u64,
    ) -> Result<BatchReply, Failure> {
        self.batch_raw(descriptors, descriptors.len(), false, num_attrs, stream)
    }

    /// [`Hip::memcpy_batch`] with `count` as given and `dsts` NULL when `null_dsts`.
    pub fn batch_raw(
        &mut self,
        descriptors: &[(u64, u64, usize)],
        count: usize,
        null_dsts: bool,
        num_attrs: usize,
        stream: u64,
    ) -> Result<BatchReply, Failure> {
        self.0.ask(BatchCommand::Copy {
            dsts: descriptors.iter().map(|d| d.0).collect(),
            srcs: descriptors.iter().map(|d| d.1).collect(),
            sizes: descriptors.iter().map(|d| d.2).collect(),
            count,
            null_dsts,
            num_attrs,
            stream,
        })
    }
}
