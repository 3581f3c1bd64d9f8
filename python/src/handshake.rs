//! The DLPack stream handshake: `__dlpack__(stream=...)` orders the work devipc enqueued
//! on a buffer before the consumer uses it.
//!
//! The argument, per the array API's `__dlpack__` (data-apis.org, array-api,
//! `array.__dlpack__`; the ROCm notes): for a stream-ordered device the consumer passes its
//! stream as an integer, `None` or `0` for the default stream, `-1` for "no
//! synchronisation"; ROCm does not use CUDA's sentinels `1` and `2`; on the CPU only
//! `None` is accepted. devipc gives real HIP memory `kDLROCM` and follows those rules; for
//! real Ascend memory (`kDLExtDev`, where the standard names no stream type) it takes the
//! same integers, an `aclrtStream` as an integer. The emulator's memory is `kDLCPU`: only
//! `None`. Anything else is an `InvalidArgumentError`.
//!
//! What is ordered: the copies devipc's streams enqueued through this buffer object (or
//! spans of it) in this process ([`Users`]). For each such stream the producer records a
//! fresh event after its work so far; a stream whose event is already complete has
//! nothing pending (and is forgotten). Otherwise, for a device consumer, the consumer's
//! stream waits for the event (`hipStreamWaitEvent` / `aclrtStreamWaitEvent`: the host
//! does not block); for the emulator's host consumer, the host waits for it (GIL
//! released, Ctrl-C between slices). Work of other processes is ordered by signals, as
//! ever; copies through another Python object of the same memory (a second import, a
//! local import of an own export) are that object's.

use std::sync::Arc;

use dlpark::ffi::{DLDevice, DLDeviceType};
use pyo3::prelude::*;

use devipc::RawStream;

use crate::errors::{self, to_py};
use crate::span::Users;
use crate::wait::sliced;

/// Who consumes the memory, from `__dlpack__`'s `stream`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Consumer {
    /// The host (the emulator's `kDLCPU` memory): the producer waits.
    Host,
    /// The consumer asked for no synchronisation (`-1`).
    NoSync,
    /// A device stream of the consumer (0: the default stream).
    Stream(usize),
}

/// The consumer `stream` names for memory on `device`, checked.
pub(crate) fn consumer(device: DLDevice, stream: Option<&Bound<'_, PyAny>>) -> PyResult<Consumer> {
    let streamed = matches!(
        device.device_type,
        DLDeviceType::ROCM | DLDeviceType::EXTDEV
    );
    if !streamed {
        return match stream {
            None => Ok(Consumer::Host),
            Some(s) if s.is_none() => Ok(Consumer::Host),
            Some(s) => Err(errors::invalid_argument(format!(
                "DLPack's stream must be None for memory the host reads (kDLCPU: the \
                 emulator's), not {}",
                s.repr().map(|r| r.to_string()).unwrap_or_default()
            ))),
        };
    }
    let Some(stream) = stream.filter(|s| !s.is_none()) else {
        return Ok(Consumer::Stream(0));
    };
    let value = match stream.extract::<i128>() {
        Ok(v) if !stream.is_instance_of::<pyo3::types::PyBool>() => v,
        _ => {
            return Err(errors::invalid_argument(format!(
                "DLPack's stream for device memory is an integer (a stream pointer, 0 or \
                 None for the default stream, -1 for no synchronisation), not {}",
                stream.repr().map(|r| r.to_string()).unwrap_or_default()
            )));
        }
    };
    match value {
        -1 => Ok(Consumer::NoSync),
        1 | 2 => Err(errors::invalid_argument(format!(
            "DLPack's stream {value} is a CUDA default-stream sentinel; on ROCm (and Ascend) \
             the default stream is 0 or None"
        ))),
        v => usize::try_from(v).map(Consumer::Stream).map_err(|_| {
            errors::invalid_argument(format!(
                "DLPack's stream {value} is neither a stream pointer, 0, None nor -1"
            ))
        }),
    }
}

/// Orders the work `users` noted before `consumer` (see the [module docs](self)); the
/// memory is on `device` (devipc's id) for a device consumer.
pub(crate) fn order(
    py: Python<'_>,
    users: &Arc<Users>,
    device: devipc::DeviceId,
    consumer: Consumer,
) -> PyResult<()> {
    if consumer == Consumer::NoSync {
        return Ok(());
    }
    for core in users.snapshot() {
        let recorded = py
            .detach(|| -> devipc::Result<Option<devipc::Event>> {
                let event = core.rt.create_event(core.stream.device())?;
                core.stream.record(&event)?;
                if event.is_complete()? {
                    users.forget(&core);
                    return Ok(None);
                }
                Ok(Some(event))
            })
            .map_err(to_py)?;
        let Some(event) = recorded else { continue };
        match consumer {
            Consumer::Host => {
                let waited = sliced(
                    py,
                    None,
                    "ordering a DLPack export after devipc's copies",
                    |s| event.wait(Some(s)),
                );
                py.detach(|| {
                    if waited.is_ok() {
                        users.forget(&core);
                    }
                    drop(event);
                });
                waited?;
            }
            Consumer::Stream(raw) => py
                .detach(|| -> devipc::Result<()> {
                    // SAFETY: `raw` is the consumer's stream, which the DLPack protocol
                    // makes the consumer vouch for (a live stream of the memory's vendor
                    // runtime, or 0 for the default stream, for the length of the
                    // `__dlpack__` call); this wrapper ends with this call and destroys
                    // nothing.
                    #[allow(unsafe_code, reason = "the DLPack consumer's stream")]
                    let theirs = unsafe {
                        devipc::Stream::wrap(&core.rt, device, RawStream::from_raw(raw))
                    }?;
                    let waited = theirs.wait_event(&event);
                    drop((theirs, event));
                    waited
                })
                .map_err(to_py)?,
            Consumer::NoSync => {}
        }
    }
    Ok(())
}
