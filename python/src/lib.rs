//! `devipc._devipc`: the Python extension module of devipc (PyO3, abi3), wrapping the safe
//! Rust API: [`Runtime`](runtime::Runtime), the buffers (`SharedBuffer`, `ImportedBuffer`,
//! with DLPack export, its stream handshake and typed views), [`Signal`](signal::Signal),
//! the data plane (`Stream`, `Event`, `Request`, `Span`), the rendezvous
//! (`ShareServer`, `Connected`), the options objects (`ExportOptions`, `AllocateOptions`,
//! `ShareOptions`, `ConnectOptions`), `doctor()`, `token_info()`, the exception classes
//! (`_errors`, made from the table of error kinds) and the test aids (`_framework_malloc`,
//! `_framework_free`, `_dlpack_handshake`). Tokens are `str`. The Python package `devipc` re-exports it: the
//! exceptions in `devipc.errors`, the test aids in `devipc.testing`, the rest at the root;
//! it adds the tensor-sharing layer (`devipc.tensors`, `devipc.arrays`, `devipc.torch`).

use pyo3::prelude::*;

mod buffers;
mod dlpack;
mod doctor;
mod errors;
mod handshake;
mod held;
mod options;
mod rendezvous;
mod request;
mod runtime;
mod signal;
mod slot;
mod span;
mod stream;
mod testing;
mod tokens;
mod wait;

/// The extension module.
#[pymodule]
fn _devipc(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<runtime::Runtime>()?;
    m.add_class::<buffers::Buffer>()?;
    m.add_class::<buffers::SharedBuffer>()?;
    m.add_class::<buffers::ImportedBuffer>()?;
    m.add_class::<dlpack::TensorView>()?;
    m.add_class::<signal::Signal>()?;
    m.add_class::<stream::Stream>()?;
    m.add_class::<stream::Event>()?;
    m.add_class::<request::Request>()?;
    m.add_class::<span::Span>()?;
    m.add_class::<rendezvous::ShareServer>()?;
    m.add_class::<rendezvous::Connected>()?;
    m.add_class::<options::PyExportOptions>()?;
    m.add_class::<options::PyAllocateOptions>()?;
    m.add_class::<options::PyShareOptions>()?;
    m.add_class::<options::PyConnectOptions>()?;
    m.add_function(wrap_pyfunction!(doctor::doctor, m)?)?;
    m.add_function(wrap_pyfunction!(tokens::token_info, m)?)?;
    m.add_function(wrap_pyfunction!(dlpack::_dlpack_device_for, m)?)?;
    m.add_function(wrap_pyfunction!(dlpack::_dlpack_handshake, m)?)?;
    m.add_function(wrap_pyfunction!(errors::_binding_error, m)?)?;
    m.add_function(wrap_pyfunction!(testing::_framework_malloc, m)?)?;
    m.add_function(wrap_pyfunction!(testing::_framework_free, m)?)?;
    m.add_function(wrap_pyfunction!(testing::_hold_stream, m)?)?;
    m.add_function(wrap_pyfunction!(testing::_release_stream, m)?)?;
    m.add_function(wrap_pyfunction!(testing::_wait_for_drained, m)?)?;
    errors::register(m)?;
    Ok(())
}
