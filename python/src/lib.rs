//! `devipc._devipc`: the Python extension module of devipc (PyO3, abi3), wrapping the safe
//! Rust API: [`Runtime`](runtime::Runtime), the buffers (`SharedBuffer`, `ImportedBuffer`,
//! with DLPack export and typed views), [`Signal`](signal::Signal), the rendezvous
//! (`ShareServer`, `Connected`), `doctor()`, `token_info()` and the exception classes.
//! Tokens are `str`. The Python package `devipc` re-exports all of it and adds the
//! tensor-sharing layer (`devipc.tensors`, `devipc.arrays`, `devipc.torch`).

use pyo3::prelude::*;

mod buffers;
mod dlpack;
mod doctor;
mod errors;
mod held;
mod rendezvous;
mod runtime;
mod signal;
mod slot;
mod tokens;

/// The extension module.
#[pymodule]
fn _devipc(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<runtime::Runtime>()?;
    m.add_class::<buffers::Buffer>()?;
    m.add_class::<buffers::SharedBuffer>()?;
    m.add_class::<buffers::ImportedBuffer>()?;
    m.add_class::<dlpack::TensorView>()?;
    m.add_class::<signal::Signal>()?;
    m.add_class::<rendezvous::ShareServer>()?;
    m.add_class::<rendezvous::Connected>()?;
    m.add_function(wrap_pyfunction!(doctor::doctor, m)?)?;
    m.add_function(wrap_pyfunction!(tokens::token_info, m)?)?;
    m.add_function(wrap_pyfunction!(dlpack::_dlpack_device_for, m)?)?;
    errors::register(m)?;
    Ok(())
}
