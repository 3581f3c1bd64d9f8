//! DLPack export of devipc buffers, through `dlpark` (the managed-tensor layout, both
//! capsule ABIs and the `__dlpack__` argument rules).
//!
//! A buffer exports itself as a 1-D `uint8` tensor of all its bytes; [`TensorView`] (made
//! by `buffer.view(dtype, shape, strides, offset)`) exports a typed, strided tensor over
//! part of it, which is how the tensor-sharing layer rebuilds each tensor. Every managed
//! tensor holds an `Arc` of the buffer ([`Held`]), so the memory outlives the Python
//! buffer object while a consumer holds the view.
//!
//! The device type follows [`dl_device`](crate::held::dl_device). The stream handshake
//! (`__dlpack__(stream=...)`: which values, and how the copies devipc's streams enqueued
//! on the buffer are ordered before the consumer) is [`crate::handshake`]'s.

use std::sync::Arc;

use dlpark::ffi::{
    DLDataType, DLDataTypeCode, DLDevice, DLManagedTensor, DLManagedTensorVersioned,
};
use dlpark::metadata::Dynamic;
use dlpark::python::{DlpackExporter, ExportRequest, export_dlpack};
use dlpark::{DlpackFlags, Managed, ManagedTensorBase};
use pyo3::exceptions::PyBufferError;
use pyo3::prelude::*;

use crate::errors;
use crate::handshake;
use crate::held::Held;

/// The DLPack element type named `name` (numpy / torch spelling, without `torch.`).
pub(crate) fn dtype(name: &str) -> PyResult<DLDataType> {
    let (code, bits) = match name {
        "bool" => (DLDataTypeCode::BOOL, 8),
        "int8" => (DLDataTypeCode::INT, 8),
        "int16" => (DLDataTypeCode::INT, 16),
        "int32" => (DLDataTypeCode::INT, 32),
        "int64" => (DLDataTypeCode::INT, 64),
        "uint8" => (DLDataTypeCode::UINT, 8),
        "uint16" => (DLDataTypeCode::UINT, 16),
        "uint32" => (DLDataTypeCode::UINT, 32),
        "uint64" => (DLDataTypeCode::UINT, 64),
        "float16" => (DLDataTypeCode::FLOAT, 16),
        "float32" => (DLDataTypeCode::FLOAT, 32),
        "float64" => (DLDataTypeCode::FLOAT, 64),
        "bfloat16" => (DLDataTypeCode::BFLOAT, 16),
        "complex64" => (DLDataTypeCode::COMPLEX, 64),
        "complex128" => (DLDataTypeCode::COMPLEX, 128),
        other => {
            return Err(errors::invalid_argument(format!(
                "unsupported dtype {other:?}: expected bool, int8..int64, uint8..uint64, \
                 float16/32/64, bfloat16, complex64 or complex128"
            )));
        }
    };
    Ok(DLDataType::scalar(code, bits))
}

/// A typed, strided view of `byte_offset..` of a buffer: shape and strides in elements.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    pub(crate) dtype: DLDataType,
    pub(crate) shape: Vec<i64>,
    pub(crate) strides: Vec<i64>,
    pub(crate) byte_offset: u64,
}

impl Layout {
    /// All `len` bytes as a 1-D `uint8` tensor.
    pub(crate) fn bytes(len: usize) -> Layout {
        Layout {
            dtype: DLDataType::scalar(DLDataTypeCode::UINT, 8),
            shape: vec![i64::try_from(len).unwrap_or(i64::MAX)],
            strides: vec![1],
            byte_offset: 0,
        }
    }

    /// A view of `dtype` with `shape`, `strides` (elements; `None`: C-contiguous) at
    /// `offset` bytes, checked to lie within `len` bytes and to be aligned to its element.
    pub(crate) fn checked(
        dtype_name: &str,
        shape: Vec<i64>,
        strides: Option<Vec<i64>>,
        offset: u64,
        len: usize,
    ) -> PyResult<Layout> {
        let dtype = dtype(dtype_name)?;
        let item = i128::from(dtype.bits / 8);
        if shape.iter().any(|&d| d < 0) {
            return Err(errors::invalid_argument(format!(
                "negative dimension in shape {shape:?}"
            )));
        }
        let strides = match strides {
            Some(s) if s.len() != shape.len() => {
                return Err(errors::invalid_argument(format!(
                    "shape {shape:?} and strides {s:?} differ in length"
                )));
            }
            Some(s) => s,
            None => contiguous(&shape),
        };
        if offset % (item as u64) != 0 {
            return Err(errors::invalid_argument(format!(
                "offset {offset} is not a multiple of the {dtype_name} element size {item}"
            )));
        }
        // The lowest and highest byte the view touches, relative to `offset`; an
        // overflow of i128 is out of bounds too.
        let empty = shape.contains(&0);
        let extent = || -> Option<(i128, i128)> {
            let (mut low, mut high) = (0i128, 0i128);
            for (&d, &s) in shape.iter().zip(&strides) {
                let span = i128::from(d.max(1) - 1)
                    .checked_mul(i128::from(s))?
                    .checked_mul(item)?;
                if span < 0 {
                    low = low.checked_add(span)?;
                } else {
                    high = high.checked_add(span)?;
                }
            }
            let start = i128::from(offset).checked_add(low)?;
            let end = i128::from(offset).checked_add(high)?.checked_add(item)?;
            Some((start, end))
        };
        let (start, end) = extent().unwrap_or((-1, i128::MAX));
        if !empty && (start < 0 || end > len as i128) {
            return Err(errors::invalid_argument(format!(
                "a {dtype_name} view with shape {shape:?}, strides {strides:?} at offset \
                 {offset} reaches bytes {start}..{end}, outside the {len}-byte buffer"
            )));
        }
        if empty && offset > len as u64 {
            return Err(errors::invalid_argument(format!(
                "offset {offset} is past the end of the {len}-byte buffer"
            )));
        }
        Ok(Layout {
            dtype,
            shape,
            strides,
            byte_offset: offset,
        })
    }
}

/// C-contiguous strides (elements) for `shape`.
fn contiguous(shape: &[i64]) -> Vec<i64> {
    let mut strides = vec![1i64; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1].saturating_mul(shape[i + 1].max(1));
    }
    strides
}

/// One export: the buffer (kept alive by every managed tensor made from it) and a layout.
pub(crate) struct Export {
    pub(crate) held: Arc<Held>,
    pub(crate) layout: Layout,
}

impl Export {
    fn managed<M: ManagedTensorBase>(&self) -> PyResult<Managed<M>> {
        let layout = &self.layout;
        let mut init = Dynamic::new(layout.shape.clone(), layout.strides.clone())
            .initialize_as::<M>(Arc::clone(&self.held))
            .map_err(|e| PyBufferError::new_err(e.to_string()))?;
        init.set_data(self.held.ptr() as usize as *mut std::ffi::c_void)
            .set_device(self.held.dl_device)
            .set_dtype(layout.dtype)
            .set_byte_offset(layout.byte_offset);
        // SAFETY: the data pointer is the buffer's address in this process, and the
        // layout was checked to lie within its length (`Layout::checked`); the managed
        // tensor's context owns an `Arc` of the buffer, so the memory stays mapped until
        // the consumer calls the deleter; shape and strides are copied into the managed
        // allocation; no flags are set (writable, not a copy), which is true of mapped
        // device memory.
        Ok(unsafe { init.finish() })
    }
}

impl DlpackExporter for Export {
    fn device(&self) -> DLDevice {
        self.held.dl_device
    }

    fn flags(&self) -> DlpackFlags {
        DlpackFlags::empty()
    }

    fn prepare_export(&self, py: Python<'_>, request: &ExportRequest<'_>) -> PyResult<()> {
        let consumer = handshake::consumer(self.held.dl_device, request.stream())?;
        handshake::order(py, &self.held.users, self.held.device(), consumer)
    }

    fn export_legacy(&self, _py: Python<'_>) -> PyResult<Managed<DLManagedTensor>> {
        self.managed()
    }

    fn export_versioned(&self, _py: Python<'_>) -> PyResult<Managed<DLManagedTensorVersioned>> {
        self.managed()
    }
}

/// Answers a `__dlpack__` call for `held` viewed as `layout`.
pub(crate) fn dlpack(
    py: Python<'_>,
    held: Arc<Held>,
    layout: Layout,
    stream: Option<&Bound<'_, PyAny>>,
    max_version: Option<(u32, u32)>,
    dl_device: Option<(u32, i32)>,
    copy: Option<bool>,
) -> PyResult<Py<PyAny>> {
    let request = ExportRequest::parse(stream, max_version, dl_device, copy)?;
    export_dlpack(&Export { held, layout }, py, request)
}

/// `(device_type, device_id)` for `__dlpack_device__`.
pub(crate) fn device_tuple(held: &Held) -> (u32, i32) {
    (held.dl_device.device_type.0, held.dl_device.device_id)
}

/// The DLPack `(device_type, device_id)` devipc gives memory on `device` of a `kind`
/// runtime (`"ascend"`/`"hip"`), emulated or not: the mapping of
/// [`dl_device`](crate::held::dl_device), for tests and tools.
#[pyfunction]
pub(crate) fn _dlpack_device_for(kind: &str, emulated: bool, device: u32) -> PyResult<(u32, i32)> {
    let kind = kind.parse::<devipc::BackendKind>().map_err(errors::to_py)?;
    let d = crate::held::dl_device(kind, emulated, devipc::DeviceId(device));
    Ok((d.device_type.0, d.device_id))
}

/// Test aid: runs the stream handshake of `__dlpack__(stream=stream)` for `buffer` (a
/// buffer or a `TensorView`) without exporting; `as_device` treats the memory as `kDLROCM`
/// (a real device's, whose consumer passes a stream), so that the emulator's streams
/// exercise the device path ([`crate::handshake`]).
#[pyfunction]
#[pyo3(signature = (buffer, stream=None, as_device=false))]
pub(crate) fn _dlpack_handshake(
    py: Python<'_>,
    buffer: &Bound<'_, PyAny>,
    stream: Option<&Bound<'_, PyAny>>,
    as_device: bool,
) -> PyResult<()> {
    let held = if let Ok(buf) = buffer.cast::<crate::buffers::Buffer>() {
        buf.get().held()?
    } else if let Ok(view) = buffer.cast::<TensorView>() {
        Arc::clone(&view.get().held)
    } else {
        return Err(errors::invalid_argument(
            "expected a devipc buffer or TensorView",
        ));
    };
    let mut device = held.dl_device;
    if as_device {
        device.device_type = dlpark::ffi::DLDeviceType::ROCM;
    }
    let consumer = handshake::consumer(device, stream)?;
    handshake::order(py, &held.users, held.device(), consumer)
}

/// A typed, strided view of part of a buffer, made by `buffer.view(...)`, for
/// `numpy.from_dlpack` / `torch.from_dlpack`. It keeps the buffer's memory alive (and the
/// buffer's `close()` refuses) until it and every array made from it are gone.
#[pyclass(frozen, module = "devipc._devipc")]
pub(crate) struct TensorView {
    held: Arc<Held>,
    layout: Layout,
}

impl TensorView {
    /// A view of `held` as `layout` (already checked against it).
    pub(crate) fn new(held: Arc<Held>, layout: Layout) -> TensorView {
        TensorView { held, layout }
    }
}

#[pymethods]
impl TensorView {
    /// Exports the view as a DLPack capsule (the standard `__dlpack__` protocol).
    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__(
        &self,
        py: Python<'_>,
        stream: Option<&Bound<'_, PyAny>>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(u32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Py<PyAny>> {
        dlpack(
            py,
            Arc::clone(&self.held),
            self.layout.clone(),
            stream,
            max_version,
            dl_device,
            copy,
        )
    }

    /// `(device_type, device_id)` of the memory, as DLPack numbers them.
    fn __dlpack_device__(&self) -> (u32, i32) {
        device_tuple(&self.held)
    }

    /// The view's shape (elements).
    #[getter]
    fn shape(&self) -> Vec<i64> {
        self.layout.shape.clone()
    }

    /// The view's strides (elements).
    #[getter]
    fn strides(&self) -> Vec<i64> {
        self.layout.strides.clone()
    }

    /// The view's offset in bytes from the buffer's start.
    #[getter]
    fn offset(&self) -> u64 {
        self.layout.byte_offset
    }
}
