//! HIP runtime C ABI for devipc: C types, constants and the `HipApi` function table.
//!
//! Filled by later work (issue: HIP backend). The table is filled three ways with one
//! type: libloading from a discovered `libamdhip64.so`, at link time via `hip-sys`, or
//! from the devipc emulator.
