//! ACL shell command for `aclrtMemcpyBatchAsync` (issue 25), with its [`Acl`] client
//! call. Host operands are buffers the command brings (their bytes come back after the
//! stream is synchronised); device operands are addresses. The reply carries the call's
//! status and `*failIndex` together: the rules judge both.

use std::ffi::c_void;
use std::sync::Arc;

use devipc_ascend_sys::codes::ACL_SUCCESS;
use devipc_ascend_sys::types::{aclrtMemLocation, aclrtMemcpyBatchAttr};
use serde::{Deserialize, Serialize};

use super::{Acl, AclCommand, AclShell, ptr};
use crate::shell::{Exec, Failure, Reply, value};

/// What `*failIndex` holds before the call, so a rule sees whether it was written.
pub const FAIL_INDEX_UNTOUCHED: u64 = 0x5eed;

/// One operand of a descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Operand {
    /// Device memory at this address.
    Device(u64),
    /// Host buffer `n` of the command, at this offset.
    Host(usize, usize),
}

/// One descriptor: `size` bytes from `src` to `dst`, whose buffer holds `dest_max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchDescriptor {
    /// Destination.
    pub dst: Operand,
    /// `destMaxs[i]`.
    pub dest_max: usize,
    /// Source.
    pub src: Operand,
    /// `sizes[i]`.
    pub size: usize,
}

/// One attribute: `(type, id)` of the destination and of the source, and whether to set a
/// reserved byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchAttr {
    /// `dstLoc` as (type, id).
    pub dst: (i32, u32),
    /// `srcLoc` as (type, id).
    pub src: (i32, u32),
    /// Sets `rsv[0] = 1`.
    pub dirty_rsv: bool,
}

/// A batch command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum BatchCommand {
    /// `aclrtMemcpyBatchAsync` on the default stream with `failIndex` preset to
    /// [`FAIL_INDEX_UNTOUCHED`], then `aclrtSynchronizeStream`.
    Copy {
        /// The host buffers the descriptors name.
        hosts: Vec<Vec<u8>>,
        /// The descriptors.
        descriptors: Vec<BatchDescriptor>,
        /// `numBatches` as passed.
        num_batches: usize,
        /// The attributes.
        attrs: Vec<BatchAttr>,
        /// `attrsIndexes` (`numAttrs` is `attrs.len()`).
        indexes: Vec<usize>,
    },
}

/// What a batch call returned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchReply {
    /// The call's failure.
    pub failure: Option<Failure>,
    /// `*failIndex` after the call.
    pub fail_index: u64,
    /// The host buffers after the stream was synchronised.
    pub hosts: Vec<Vec<u8>>,
}

impl From<BatchCommand> for AclCommand {
    fn from(c: BatchCommand) -> Self {
        AclCommand::Batch(c)
    }
}

impl AclShell {
    /// Runs a [`BatchCommand`].
    pub(super) fn batch(&mut self, command: BatchCommand) -> Reply {
        let api = Arc::clone(&self.api);
        let BatchCommand::Copy {
            mut hosts,
            descriptors,
            num_batches,
            attrs,
            indexes,
        } = command;
        let f = api
            .aclrtMemcpyBatchAsync
            .ok_or_else(|| Failure::harness("this runtime lacks aclrtMemcpyBatchAsync"))?;
        if descriptors.len() < num_batches || indexes.len() < attrs.len() {
            return Err(Failure::harness("fewer descriptors or indexes than passed"));
        }
        let mut address = |o: Operand| -> Result<*mut c_void, Failure> {
            match o {
                Operand::Device(a) => Ok(ptr(a)),
                Operand::Host(n, off) => hosts
                    .get_mut(n)
                    .filter(|h| off <= h.len())
                    .map(|h| h[off..].as_mut_ptr().cast())
                    .ok_or_else(|| Failure::harness("no such host buffer")),
            }
        };
        let mut dsts = Vec::new();
        let mut srcs = Vec::new();
        for d in &descriptors {
            dsts.push(address(d.dst)?);
            srcs.push(address(d.src)?);
        }
        let mut dest_maxs: Vec<usize> = descriptors.iter().map(|d| d.dest_max).collect();
        let mut sizes: Vec<usize> = descriptors.iter().map(|d| d.size).collect();
        let loc = |(t, id): (i32, u32)| aclrtMemLocation { id, r#type: t };
        let mut c_attrs: Vec<aclrtMemcpyBatchAttr> = attrs
            .iter()
            .map(|a| {
                let mut rsv = [0u8; 16];
                rsv[0] = u8::from(a.dirty_rsv);
                aclrtMemcpyBatchAttr {
                    dstLoc: loc(a.dst),
                    srcLoc: loc(a.src),
                    rsv,
                }
            })
            .collect();
        // Never a dangling array, even with no attributes.
        c_attrs.reserve(1);
        let mut indexes = indexes;
        indexes.reserve(1);
        let mut fail_index = FAIL_INDEX_UNTOUCHED as usize;
        // SAFETY: the descriptor arrays hold at least `num_batches` elements (checked),
        // `c_attrs` and `indexes` at least `attrs.len()`; all live across the call and the
        // synchronisation; host operands point into `hosts`, which is not touched until the
        // stream is synchronised; device operands are this shell's memory (or deliberately
        // invalid, the rule under test).
        let code = unsafe {
            f(
                dsts.as_mut_ptr(),
                dest_maxs.as_mut_ptr(),
                srcs.as_mut_ptr(),
                sizes.as_mut_ptr(),
                num_batches,
                c_attrs.as_mut_ptr(),
                indexes.as_mut_ptr(),
                attrs.len(),
                &mut fail_index,
                std::ptr::null_mut(),
            )
        };
        let failure = (code != ACL_SUCCESS).then(|| self.failure("aclrtMemcpyBatchAsync", code));
        // SAFETY: the default stream.
        let synced = unsafe { (api.aclrtSynchronizeStream)(std::ptr::null_mut()) };
        if failure.is_none() {
            self.check("aclrtSynchronizeStream", synced)?;
        }
        value(BatchReply {
            failure,
            fail_index: fail_index as u64,
            hosts,
        })
    }
}

impl<E: Exec<AclCommand>> Acl<E> {
    /// `aclrtMemcpyBatchAsync` of `descriptors` (all passed) with `attrs` / `indexes` on the
    /// default stream, then a synchronisation.
    pub fn memcpy_batch(
        &mut self,
        hosts: Vec<Vec<u8>>,
        descriptors: &[BatchDescriptor],
        attrs: &[BatchAttr],
        indexes: &[usize],
    ) -> Result<BatchReply, Failure> {
        self.batch_counted(hosts, descriptors, descriptors.len(), attrs, indexes)
    }

    /// [`Acl::memcpy_batch`] with `numBatches` as given.
    pub fn batch_counted(
        &mut self,
        hosts: Vec<Vec<u8>>,
        descriptors: &[BatchDescriptor],
        num_batches: usize,
        attrs: &[BatchAttr],
        indexes: &[usize],
    ) -> Result<BatchReply, Failure> {
        self.0.ask(BatchCommand::Copy {
            hosts,
            descriptors: descriptors.to_vec(),
            num_batches,
            attrs: attrs.to_vec(),
            indexes: indexes.to_vec(),
        })
    }
}
