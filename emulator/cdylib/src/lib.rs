//! `libdevipc_emulator.so`: the devipc emulator exporting the vendor symbol names.
//!
//! Filled by the emulator issue, so that the `libloading` path of the backends can be
//! tested against a real shared library.
