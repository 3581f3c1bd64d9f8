//! What devipc reports about backends, devices and tokens: the types inside
//! [`BackendInfo`](crate::BackendInfo), [`Error`](crate::Error)'s start-up variants and
//! the placement calls, for code that inspects them (a doctor, logs, a scheduler
//! placing work by device).
//!
//! None of them is needed to share memory; they are the answers to "what did devipc
//! find, and why did it choose so":
//!
//! - start-up: [`LoadAttempt`] (one place discovery looked for a vendor library, in
//!   [`Error::LibraryNotFound`](crate::Error::LibraryNotFound)), [`BackendAttempt`] (one
//!   backend `auto` tried, in [`Error::NoBackendStarted`](crate::Error::NoBackendStarted)),
//!   [`LibrarySource`] and [`RuntimeVersion`] (where the running backend's functions came
//!   from, and its version, in [`BackendInfo`](crate::BackendInfo));
//! - devices: [`PhysicalDevice`] ([`Runtime::physical_device`](crate::Runtime::physical_device),
//!   and what tokens carry), made of a [`PciBusId`] and a [`DeviceUuid`];
//! - tokens: [`ExportedFrom`], what both token kinds say about where they were exported
//!   ([`Runtime::local_device_of`](crate::Runtime::local_device_of) takes either), and
//!   [`PidValidation`], who may import an export (the value of
//!   [`ExportOptions::validation`](crate::ExportOptions::validation)).

pub use devipc_core::{
    BackendAttempt, DeviceUuid, ExportedFrom, LibrarySource, LoadAttempt, PciBusId, PhysicalDevice,
    PidValidation, RuntimeVersion,
};
