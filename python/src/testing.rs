//! The test aids behind `devipc.testing`: memory allocated as a framework allocates it
//! (`hipMalloc`, `aclrtMalloc`), outside devipc's buffers, for `export_external` without a
//! framework. Not part of `Runtime`'s surface; `devipc.testing` wraps these functions.

use pyo3::prelude::*;

use crate::runtime::Runtime;

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
