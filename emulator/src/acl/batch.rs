//! `aclrtMemcpyBatchAsync` (issue 25): many host-to-device / device-to-host copies in one
//! call, over the stream queues `aclrtMemcpyAsync` uses.
//!
//! The vendor checks in two layers, and the emulator in the same order:
//!
//! 1. the ACL wrapper (`MemcpyBatchImpl`): NULL arrays (`ascend.param.null-pointer`),
//!    `numBatches == 0`, `destMaxs[i] < sizes[i]`, non-zero `rsv` bytes of an attribute:
//!    100000, `*failIndex` untouched ([`check_wrapper`]);
//! 2. the runtime: the stream, then the attribute indexes (107000, `*failIndex =
//!    SIZE_MAX`), then descriptor by descriptor (`LoopMemcpyAsync`): size and operands,
//!    the attribute's locations against the memory, the direction (host to device or
//!    device to host only), and the copy itself as `aclrtMemcpyAsync` of that direction
//!    checks it (bounds, revoked memory, and memory imported by key from another device,
//!    which allows no host copy: api-facts C.4). The first descriptor that fails stops the
//!    loop with 107000 (or its own rule's code) and `*failIndex = i`; the copies before it
//!    are already enqueued ([`plan`]).
//!
//! The copies that pass are one operation of the stream, run in order when the stream
//! reaches them; each is checked again then (memory freed or revoked in the meantime fails
//! it, and the next `aclrtSynchronizeStream` reports it), as for the single copy. The
//! vendor blocks until the copies are done when a host operand is not page-locked; the
//! emulator does not (the caller must keep host memory valid until the stream ran the
//! copies either way).

use devipc_ascend_sys::types::{
    ACL_MEM_LOCATION_TYPE_DEVICE, ACL_MEM_LOCATION_TYPE_HOST, ACL_MEM_LOCATION_TYPE_HOST_NUMA,
    ACL_MEMCPY_DEVICE_TO_DEVICE, ACL_MEMCPY_DEVICE_TO_HOST, ACL_MEMCPY_HOST_TO_DEVICE,
    ACL_MEMCPY_HOST_TO_HOST, aclrtMemLocation, aclrtMemcpyBatchAttr, aclrtMemcpyKind,
};

use super::errors::{AclFailure, AclResult, check};
use super::memory::{self, RANGES};
use super::rules::{
    self, BATCH_ATTR_INDEXES_VALID, BATCH_ATTR_RSV_ZERO, BATCH_COUNT_NONZERO,
    BATCH_DESCRIPTOR_VALID, BATCH_DEST_MAX_COVERS_SIZE, BATCH_EARLIER_COPIES_RUN,
    BATCH_FAIL_INDEX_REPORTED, BATCH_HOST_DEVICE_ONLY, BATCH_LOCATIONS_MATCH,
};
use super::{device, stream};
use crate::stream_queue::quick;

/// One descriptor: `len` bytes from `src` to `dst`, whose buffer holds `dest_max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Descriptor {
    /// `dsts[i]`.
    pub dst: usize,
    /// `destMaxs[i]`.
    pub dest_max: usize,
    /// `srcs[i]`.
    pub src: usize,
    /// `sizes[i]`.
    pub len: usize,
}

/// A descriptor that passed, with the direction it copies in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Copy {
    /// The descriptor.
    pub descriptor: Descriptor,
    /// `ACL_MEMCPY_HOST_TO_DEVICE` or `ACL_MEMCPY_DEVICE_TO_HOST` (another kind only with
    /// [`BATCH_HOST_DEVICE_ONLY`] switched off).
    pub kind: aclrtMemcpyKind,
}

/// The ACL wrapper's checks, after the NULL checks: the count, `destMaxs` against `sizes`,
/// and the reserved bytes of the `numAttrs` attributes.
pub fn check_wrapper(
    num_batches: usize,
    descriptors: &[Descriptor],
    attrs: &[aclrtMemcpyBatchAttr],
) -> AclResult<()> {
    check(num_batches == 0, BATCH_COUNT_NONZERO, || {
        "numBatches must be greater than 0".to_owned()
    })?;
    for (i, d) in descriptors.iter().enumerate() {
        check(d.dest_max < d.len, BATCH_DEST_MAX_COVERS_SIZE, || {
            format!(
                "sizes[{i}] = {} exceeds destMaxs[{i}] = {}",
                d.len, d.dest_max
            )
        })?;
    }
    for (k, a) in attrs.iter().enumerate() {
        check(a.rsv.iter().any(|&b| b != 0), BATCH_ATTR_RSV_ZERO, || {
            format!("attrs[{k}].rsv is not zero")
        })?;
    }
    Ok(())
}

/// What the runtime layer decided.
#[derive(Debug)]
pub struct Planned {
    /// The copies to enqueue, in descriptor order.
    pub copies: Vec<Copy>,
    /// The refusal, and the value `*failIndex` gets with it (`None`: untouched).
    pub failed: Option<(Option<usize>, AclFailure)>,
}

/// The runtime layer: the stream, the attribute indexes (`indexes`, as many as `attrs`),
/// then each descriptor in order, up to the first that fails.
pub fn plan(
    stream_handle: usize,
    descriptors: &[Descriptor],
    attrs: &[aclrtMemcpyBatchAttr],
    indexes: &[usize],
) -> AclResult<Planned> {
    stream::check(stream_handle)?;
    if let Err(f) = check_indexes(descriptors.len(), indexes) {
        return Ok(refused(Vec::new(), usize::MAX, f));
    }
    let mut copies = Vec::with_capacity(descriptors.len());
    let mut k = 0;
    for (i, d) in descriptors.iter().enumerate() {
        // The vendor's walk: attribute k + 1 takes over from index attrsIndexes[k + 1].
        if k + 1 < attrs.len().min(indexes.len()) && i >= indexes[k + 1] {
            k += 1;
        }
        match check_descriptor(i, d, attrs.get(k)) {
            Ok(copy) => copies.push(copy),
            Err(f) => {
                if !rules::enforced(BATCH_EARLIER_COPIES_RUN) {
                    copies.clear();
                }
                return Ok(refused(copies, i, f));
            }
        }
    }
    Ok(Planned {
        copies,
        failed: None,
    })
}

/// A refusal of the runtime layer, `*failIndex` = `index` unless that rule is off.
fn refused(copies: Vec<Copy>, index: usize, f: AclFailure) -> Planned {
    let index = rules::enforced(BATCH_FAIL_INDEX_REPORTED).then_some(index);
    Planned {
        copies,
        failed: Some((index, f)),
    }
}

/// `numAttrs` in `1..=numBatches`, `attrsIndexes[0] == 0`, strictly increasing, each below
/// `numBatches`.
fn check_indexes(num_batches: usize, indexes: &[usize]) -> AclResult<()> {
    let n = indexes.len();
    let bad = if n == 0 || n > num_batches {
        Some(format!("numAttrs is {n}; it must be in 1..={num_batches}"))
    } else if indexes[0] != 0 {
        Some(format!("attrsIndexes[0] is {}, not 0", indexes[0]))
    } else if let Some(k) = (1..n).find(|&k| indexes[k] <= indexes[k - 1]) {
        Some(format!(
            "attrsIndexes[{k}] = {} does not follow attrsIndexes[{}] = {}",
            indexes[k],
            k - 1,
            indexes[k - 1]
        ))
    } else {
        indexes
            .iter()
            .position(|&x| x >= num_batches)
            .map(|k| format!("attrsIndexes[{k}] = {} is not below numBatches", indexes[k]))
    };
    match bad {
        Some(why) => check(true, BATCH_ATTR_INDEXES_VALID, || why),
        None => Ok(()),
    }
}

/// Where memory is, as the runtime's pointer attributes say: device memory of this process
/// (with the device's id in this process, `None` if it does not see it) or host memory
/// (`aclrtMallocHost` and unregistered memory alike).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    Host,
    Device(Option<i32>),
}

fn place_of(addr: usize) -> AclResult<Place> {
    match RANGES.resolve(addr) {
        Some(hit) => Ok(Place::Device(device::user_id_of(hit.value.device)?)),
        None => Ok(Place::Host),
    }
}

/// Whether `loc` (an attribute's) names `place`: host NUMA counts as host.
fn names(loc: &aclrtMemLocation, place: Place) -> bool {
    match place {
        Place::Host => matches!(
            loc.r#type,
            ACL_MEM_LOCATION_TYPE_HOST | ACL_MEM_LOCATION_TYPE_HOST_NUMA
        ),
        Place::Device(id) => {
            loc.r#type == ACL_MEM_LOCATION_TYPE_DEVICE && id == Some(loc.id as i32)
        }
    }
}

/// One descriptor, checked as `ValidateAndCheckMemCpyBatchAsync` does, then as the
/// asynchronous copy of its direction.
fn check_descriptor(
    i: usize,
    d: &Descriptor,
    attr: Option<&aclrtMemcpyBatchAttr>,
) -> AclResult<Copy> {
    if d.len == 0 || d.len > d.dest_max || d.dst == 0 || d.src == 0 {
        return Err(AclFailure::rule(
            BATCH_DESCRIPTOR_VALID,
            format!(
                "descriptor {i}: size {} must be in 1..=destMax {}, and dst {:#x} / src {:#x} \
                 non-NULL",
                d.len, d.dest_max, d.dst, d.src
            ),
        ));
    }
    let (dst, src) = (place_of(d.dst)?, place_of(d.src)?);
    if let Some(a) = attr {
        for (what, loc, place) in [("dst", &a.dstLoc, dst), ("src", &a.srcLoc, src)] {
            check(!names(loc, place), BATCH_LOCATIONS_MATCH, || {
                format!(
                    "descriptor {i}: the attribute's {what}Loc (type {}, id {}) is not where \
                     the memory is ({place:?})",
                    loc.r#type, loc.id
                )
            })?;
        }
    }
    let kind = match (dst, src) {
        (Place::Device(_), Place::Host) => ACL_MEMCPY_HOST_TO_DEVICE,
        (Place::Host, Place::Device(_)) => ACL_MEMCPY_DEVICE_TO_HOST,
        (Place::Device(_), Place::Device(_)) | (Place::Host, Place::Host) => {
            let device = matches!(dst, Place::Device(_));
            check(true, BATCH_HOST_DEVICE_ONLY, || {
                format!(
                    "descriptor {i} copies {0} to {0}: only host-to-device and device-to-host \
                     copies are supported",
                    if device { "device" } else { "host" }
                )
            })?;
            if device {
                ACL_MEMCPY_DEVICE_TO_DEVICE
            } else {
                ACL_MEMCPY_HOST_TO_HOST
            }
        }
    };
    drop(memory::check_copy(
        d.dst, d.dest_max, d.src, d.len, kind, true,
    )?);
    Ok(Copy {
        descriptor: *d,
        kind,
    })
}

/// Submits `copies` to the stream as one task: each checked again and run by `run` in
/// order; the first failure is the task's (reported by the next synchronisation), the other
/// copies still run.
pub fn submit(
    stream_handle: usize,
    copies: Vec<Copy>,
    run: fn(&Copy) -> AclResult<()>,
) -> AclResult<()> {
    if copies.is_empty() {
        return Ok(());
    }
    let task = move || -> AclResult<()> {
        let mut first = Ok(());
        for c in &copies {
            let done = run(c);
            if first.is_ok() {
                first = done;
            }
        }
        first
    };
    stream::submit(stream_handle, quick(task))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attribute_indexes() {
        assert!(check_indexes(4, &[0]).is_ok());
        assert!(check_indexes(4, &[0, 3]).is_ok());
        for bad in [
            &[][..],
            &[1, 3],
            &[0, 3, 5],
            &[0, 3, 1],
            &[0, 0],
            &[0, 1, 2, 3, 4],
        ] {
            let e = check_indexes(4, bad).unwrap_err();
            assert_eq!(e.rule, Some(BATCH_ATTR_INDEXES_VALID), "{bad:?}");
            assert_eq!(e.code, 107_000);
        }
    }

    #[test]
    fn locations() {
        let loc = |r#type, id| aclrtMemLocation { id, r#type };
        assert!(names(&loc(ACL_MEM_LOCATION_TYPE_HOST, 7), Place::Host));
        assert!(names(&loc(ACL_MEM_LOCATION_TYPE_HOST_NUMA, 0), Place::Host));
        assert!(!names(&loc(ACL_MEM_LOCATION_TYPE_DEVICE, 0), Place::Host));
        assert!(names(
            &loc(ACL_MEM_LOCATION_TYPE_DEVICE, 1),
            Place::Device(Some(1))
        ));
        assert!(!names(
            &loc(ACL_MEM_LOCATION_TYPE_DEVICE, 0),
            Place::Device(Some(1))
        ));
        assert!(!names(
            &loc(ACL_MEM_LOCATION_TYPE_DEVICE, 0),
            Place::Device(None)
        ));
        assert!(!names(
            &loc(ACL_MEM_LOCATION_TYPE_HOST, 1),
            Place::Device(Some(1))
        ));
    }
}
