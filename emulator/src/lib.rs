//! The devipc emulator: the ACL and HIP C ABIs over host shared memory.
//!
//! Filled by the emulator issue. It will implement the vendor functions devipc and the
//! conformance suite call, across real processes, with the vendors' error codes and
//! documented IPC rules, so that every devipc path runs without an accelerator.
