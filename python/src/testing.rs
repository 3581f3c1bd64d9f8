//! The test aids behind `devipc.testing`: memory allocated as a framework allocates it
//! (`hipMalloc`, `aclrtMalloc`), outside devipc's buffers, for `export_external` without a
//! framework; on the emulator, a stream held busy so that work enqueued on it is provably
//! in flight; and a wait for the background release of dropped requests. Not part of
//! `Runtime`'s surface; `devipc.testing` wraps these functions.

use pyo3::prelude::*;

use std::time::Duration;

use crate::errors::to_py;
use crate::runtime::Runtime;
use crate::stream::Stream;

/// Allocates `size` bytes on `device` of `runtime` as a framework's allocator does, and
/// returns the device address (see `Runtime::framework_malloc`).
#[pyfunction]
#[pyo3(signature = (runtime, size, device=0))]
pub(crate) fn _framework_malloc(
    py: Python<'_>,
    runtime: PyRef<'_, Runtime>,
    size: usize,
    device: u32,
) -> PyResult<u64> {
    runtime.framework_malloc(py, size, device)
}

/// Frees a block `_framework_malloc` returned (see `Runtime::framework_free`).
#[pyfunction]
#[pyo3(signature = (runtime, ptr, device=0))]
pub(crate) fn _framework_free(
    py: Python<'_>,
    runtime: PyRef<'_, Runtime>,
    ptr: u64,
    device: u32,
) -> PyResult<()> {
    runtime.framework_free(py, ptr, device)
}

/// Emulator only: holds `stream` as if a long kernel occupied it, until
/// `_release_stream` (see `devipc::testing::hold_stream`).
#[pyfunction]
pub(crate) fn _hold_stream(py: Python<'_>, stream: PyRef<'_, Stream>) -> PyResult<()> {
    let core = stream.core().clone();
    py.detach(|| devipc::testing::hold_stream(&core.stream))
        .map_err(to_py)
}

/// Emulator only: releases a stream `_hold_stream` held; returns once its queued work ran.
#[pyfunction]
pub(crate) fn _release_stream(py: Python<'_>, stream: PyRef<'_, Stream>) -> PyResult<()> {
    let core = stream.core().clone();
    py.detach(|| devipc::testing::release_stream(&core.stream))
        .map_err(to_py)
}

/// Waits at most `timeout` seconds until the background drain released every request and
/// stream this process dropped unfinished; whether it did.
#[pyfunction]
pub(crate) fn _wait_for_drained(py: Python<'_>, timeout: f64) -> bool {
    let timeout = Duration::from_secs_f64(timeout.clamp(0.0, 3600.0));
    py.detach(|| devipc::testing::wait_for_drained(timeout))
}
