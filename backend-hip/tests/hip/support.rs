//! What the emulated topics' children share: the backend on the in-process emulator,
//! test patterns and the environment they are configured by.

use std::sync::Arc;

use devipc_core::Error;
use devipc_hip::HipBackend;

/// The HIP backend on the emulator linked into this process.
pub fn backend() -> Result<HipBackend, String> {
    HipBackend::from_api(Arc::new(devipc_emulator::hip::hip_api())).map_err(|e| e.to_string())
}

/// `len` bytes that differ from any other `seed`'s.
pub fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

/// An environment variable the parent set for this child.
pub fn env(name: &str) -> Result<String, String> {
    std::env::var(name).map_err(|_| format!("{name} not set"))
}

/// A number the parent set for this child.
pub fn num(name: &str) -> Result<usize, String> {
    env(name)?.parse().map_err(|e| format!("{name}: {e}"))
}

/// An error as the text a child reports.
pub fn e2s(e: Error) -> String {
    e.to_string()
}
