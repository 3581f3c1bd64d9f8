//! Host shared-memory primitives for devipc.
//!
//! Three parts of devipc coordinate processes through plain host memory: the emulator
//! (its whole state directory), the HIP backend (the sequence word that turns a HIP IPC
//! event into a blocking binary semaphore, DESIGN section 5.5) and the facade's crash-safe
//! holder leases. They share these primitives:
//!
//! - [`os`]: the only `unsafe` code, thin wrappers over Linux calls: `mmap` of files (`MAP_SHARED`), address
//!   reservations, `flock`, `futex`, `posix_fallocate`, `getrandom`, with safe types on top;
//! - [`process`]: process identity that survives pid reuse (pid + start time, in its pid
//!   namespace);
//! - [`liveness`]: beacons that tell processes of other pid namespaces that one is alive;
//! - [`private_dir`]: creating and validating a 0700 directory for such files;
//! - [`word_file`]: a named page of such words that a token can point a peer at;
//! - [`lease`]: crash-safe holder lists that keep an exported object from being released under its importers;
//! - [`futex`]: waiting on and waking a 32-bit word across processes, and the
//!   [`BinarySemaphore`](futex::BinarySemaphore) built on it.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(unsafe_code)]

pub mod futex;
pub mod generation;
pub mod lease;
pub mod liveness;
pub mod os;
pub mod private_dir;
pub mod process;
pub mod word_file;
