//! The baselines of P8 to P10: a raw vendor stream and one local event on it, driven
//! through the backend's own function table ([`RawApi`]), as a hand-written program does
//! it: `hipStreamCreate` + `hipEventCreateWithFlags(hipEventDisableTiming)`, or
//! `aclrtCreateStream` + `aclrtCreateEventExWithFlag(ACL_EVENT_SYNC)` (the kinds of event
//! devipc's backends create for a request); copies are `hipMemcpyAsync` /
//! `aclrtMemcpyAsync` device to device, with nothing devipc adds (no spans, no handle
//! tables, no device scoping: the thread's device was bound once by [`RawApi::of`]).

use std::ffi::c_void;

use devipc_ascend::sys::consts::ACL_EVENT_SYNC;
use devipc_ascend::sys::types::{
    ACL_EVENT_RECORDED_STATUS_COMPLETE, ACL_EVENT_RECORDED_STATUS_NOT_READY,
    ACL_MEMCPY_DEVICE_TO_DEVICE,
};
use devipc_hip::sys::{hipErrorNotReady, hipEventDisableTiming, hipMemcpyDeviceToDevice};

use crate::BenchResult;
use crate::raw::RawApi;

/// A raw stream of device 0 and a local event, destroyed on drop.
pub struct RawStream<'a> {
    raw: &'a RawApi,
    stream: *mut c_void,
    event: *mut c_void,
}

fn check(what: &str, code: i32) -> BenchResult<()> {
    if code == 0 {
        Ok(())
    } else {
        Err(format!("{what} failed with code {code}").into())
    }
}

fn acl_fn<T>(f: Option<T>, name: &str) -> BenchResult<T> {
    f.ok_or_else(|| format!("this ACL runtime has no {name}").into())
}

impl<'a> RawStream<'a> {
    /// Creates the stream and the event on the device [`RawApi::of`] bound.
    pub fn new(raw: &'a RawApi) -> BenchResult<RawStream<'a>> {
        let mut stream: *mut c_void = std::ptr::null_mut();
        let mut event: *mut c_void = std::ptr::null_mut();
        match raw {
            RawApi::Hip(api, _) => {
                // SAFETY: valid out-pointers; a documented flag.
                unsafe {
                    check(
                        "hipStreamCreate",
                        (api.hipStreamCreate)((&mut stream as *mut *mut c_void).cast()),
                    )?;
                    check(
                        "hipEventCreateWithFlags",
                        (api.hipEventCreateWithFlags)(
                            (&mut event as *mut *mut c_void).cast(),
                            hipEventDisableTiming,
                        ),
                    )?;
                }
            }
            RawApi::Acl(api) => {
                let create_event =
                    acl_fn(api.aclrtCreateEventExWithFlag, "aclrtCreateEventExWithFlag")?;
                // Checked here, so the timed calls find them.
                acl_fn(api.aclrtMemcpyAsync, "aclrtMemcpyAsync")?;
                acl_fn(api.aclrtRecordEvent, "aclrtRecordEvent")?;
                acl_fn(api.aclrtQueryEventStatus, "aclrtQueryEventStatus")?;
                // SAFETY: valid out-pointers; a documented flag.
                unsafe {
                    check("aclrtCreateStream", (api.aclrtCreateStream)(&mut stream))?;
                    check(
                        "aclrtCreateEventExWithFlag",
                        create_event(&mut event, ACL_EVENT_SYNC),
                    )?;
                }
            }
        }
        Ok(RawStream { raw, stream, event })
    }

    /// Enqueues a device-to-device copy of `len` bytes from `src` to `dst`.
    ///
    /// # Safety
    /// `src..src + len` and `dst..dst + len` are device memory of this runtime, mapped or
    /// allocated until the copy ran (a synchronisation of the stream or of the event).
    #[inline]
    pub unsafe fn copy(&self, dst: u64, src: u64, len: usize) -> BenchResult<()> {
        let (dst, src) = (dst as usize as *mut c_void, src as usize as *const c_void);
        match self.raw {
            // SAFETY: the caller's contract; the stream is live (destroyed on drop).
            RawApi::Hip(api, _) => check("hipMemcpyAsync", unsafe {
                (api.hipMemcpyAsync)(dst, src, len, hipMemcpyDeviceToDevice, self.stream.cast())
            }),
            RawApi::Acl(api) => {
                let copy = acl_fn(api.aclrtMemcpyAsync, "aclrtMemcpyAsync")?;
                // SAFETY: as above; the destination's capacity is the copy's length.
                check("aclrtMemcpyAsync", unsafe {
                    copy(dst, len, src, len, ACL_MEMCPY_DEVICE_TO_DEVICE, self.stream)
                })
            }
        }
    }

    /// Blocks until the stream's work is done.
    #[inline]
    pub fn sync(&self) -> BenchResult<()> {
        match self.raw {
            // SAFETY: a live stream of this runtime.
            RawApi::Hip(api, _) => check("hipStreamSynchronize", unsafe {
                (api.hipStreamSynchronize)(self.stream.cast())
            }),
            // SAFETY: as above.
            RawApi::Acl(api) => check("aclrtSynchronizeStream", unsafe {
                (api.aclrtSynchronizeStream)(self.stream)
            }),
        }
    }

    /// Records the event on the stream.
    #[inline]
    pub fn record(&self) -> BenchResult<()> {
        match self.raw {
            // SAFETY: a live event and stream of this runtime, of the same device.
            RawApi::Hip(api, _) => check("hipEventRecord", unsafe {
                (api.hipEventRecord)(self.event.cast(), self.stream.cast())
            }),
            RawApi::Acl(api) => {
                let record = acl_fn(api.aclrtRecordEvent, "aclrtRecordEvent")?;
                // SAFETY: as above.
                check("aclrtRecordEvent", unsafe {
                    record(self.event, self.stream)
                })
            }
        }
    }

    /// Whether the event's latest record completed (`hipEventQuery`,
    /// `aclrtQueryEventStatus`).
    #[inline]
    pub fn query(&self) -> BenchResult<bool> {
        match self.raw {
            RawApi::Hip(api, _) => {
                // SAFETY: a live event of this runtime.
                match unsafe { (api.hipEventQuery)(self.event.cast()) } {
                    0 => Ok(true),
                    code if code == hipErrorNotReady => Ok(false),
                    code => Err(format!("hipEventQuery failed with code {code}").into()),
                }
            }
            RawApi::Acl(api) => {
                let query = acl_fn(api.aclrtQueryEventStatus, "aclrtQueryEventStatus")?;
                let mut status = ACL_EVENT_RECORDED_STATUS_NOT_READY;
                // SAFETY: a live event; a valid out-pointer.
                check("aclrtQueryEventStatus", unsafe {
                    query(self.event, &mut status)
                })?;
                Ok(status == ACL_EVENT_RECORDED_STATUS_COMPLETE)
            }
        }
    }

    /// Blocks until the event's latest record completed (`hipEventSynchronize`,
    /// `aclrtSynchronizeEvent`).
    #[inline]
    pub fn sync_event(&self) -> BenchResult<()> {
        match self.raw {
            // SAFETY: a live event of this runtime.
            RawApi::Hip(api, _) => check("hipEventSynchronize", unsafe {
                (api.hipEventSynchronize)(self.event.cast())
            }),
            RawApi::Acl(api) => {
                let sync = acl_fn(api.aclrtSynchronizeEvent, "aclrtSynchronizeEvent")?;
                // SAFETY: as above.
                check("aclrtSynchronizeEvent", unsafe { sync(self.event) })
            }
        }
    }

    /// The thread's current device (`hipGetDevice`, `aclrtGetDevice`): what devipc's
    /// backends ask before each call to bind the device they need.
    #[inline]
    pub fn current_device(&self) -> BenchResult<i32> {
        let mut device = -1;
        let out = &mut device;
        match self.raw {
            RawApi::Hip(api, _) => {
                // SAFETY: a valid out-pointer.
                check("hipGetDevice", unsafe { (api.hipGetDevice)(out) })?
            }
            RawApi::Acl(api) => {
                // SAFETY: as above.
                check("aclrtGetDevice", unsafe { (api.aclrtGetDevice)(out) })?
            }
        }
        Ok(device)
    }

    /// Polls [`RawStream::query`] until the event completed.
    #[inline]
    pub fn poll_until_complete(&self) -> BenchResult<()> {
        while !self.query()? {
            std::hint::spin_loop();
        }
        Ok(())
    }
}

impl Drop for RawStream<'_> {
    fn drop(&mut self) {
        // Failures are ignored: the bench is ending its use of the objects either way.
        match self.raw {
            // SAFETY: the event and the stream were created by `new`, destroyed once; the
            // stream is synchronised first, so no work on it is left.
            RawApi::Hip(api, _) => unsafe {
                let _ = (api.hipStreamSynchronize)(self.stream.cast());
                let _ = (api.hipEventDestroy)(self.event.cast());
                let _ = (api.hipStreamDestroy)(self.stream.cast());
            },
            // SAFETY: as above.
            RawApi::Acl(api) => unsafe {
                let _ = (api.aclrtSynchronizeStream)(self.stream);
                if let Some(destroy) = api.aclrtDestroyEvent {
                    let _ = destroy(self.event);
                }
                let _ = (api.aclrtDestroyStream)(self.stream);
            },
        }
    }
}
