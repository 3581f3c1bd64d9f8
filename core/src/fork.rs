//! Fork awareness: what one process made, a child it `fork`ed inherits but must not use.
//!
//! `fork` without `exec` copies the whole address space: a child holds copies of its
//! parent's runtimes, buffers, signals and the process-wide registries behind them. None
//! of it is the child's. The vendor runtimes refuse a context inherited this way (CUDA
//! answers `cudaErrorInitializationError`; HIP and ACL document fork as unsupported after
//! initialisation), and devipc's own state names the parent: its tokens carry the parent's
//! pid and start time, its leases and holds are the parent's entries in shared tables.
//! A child that used them would act under its parent's identity, and a child that
//! released them (a `Drop`, Python's garbage collector) would free or close the parent's
//! live objects.
//!
//! So every object that must stay in its process records a [`Birth`]: the pid that made
//! it. In a child, [`Birth::check`] refuses its use with [`Error::InheritedAcrossFork`]
//! and [`Birth::is_inherited`] tells its `Drop` to let go without releasing anything (the
//! copy vanishes with the child; the original is the parent's to release). A fresh
//! runtime opened in the child is born there and works as in any other process.
//!
//! Python's `multiprocessing` used `fork` by default on Linux before 3.14; the `spawn`
//! and `forkserver` start methods never inherit a runtime.

use crate::error::{Error, Result};

/// The process an object was made in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Birth {
    pid: u32,
}

impl Birth {
    /// The calling process.
    pub fn here() -> Birth {
        Birth {
            pid: std::process::id(),
        }
    }

    /// The pid of the process that made the object.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Whether the calling process is not the one that made the object: a child forked
    /// after it was made (one `getpid`).
    pub fn is_inherited(&self) -> bool {
        std::process::id() != self.pid
    }

    /// Refuses the use of `what` (e.g. `"this Runtime"`) in a process that inherited it
    /// across `fork`.
    pub fn check(&self, what: &'static str) -> Result<()> {
        let current = std::process::id();
        if current == self.pid {
            Ok(())
        } else {
            Err(Error::InheritedAcrossFork {
                what,
                creator: self.pid,
                current,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_of_this_process_is_not_inherited() {
        let birth = Birth::here();
        assert_eq!(birth.pid(), std::process::id());
        assert!(!birth.is_inherited());
        birth.check("this test object").unwrap();
    }

    #[test]
    fn an_object_of_another_process_is_refused_with_both_pids() {
        let birth = Birth {
            pid: std::process::id().wrapping_add(1),
        };
        assert!(birth.is_inherited());
        let e = birth.check("this Runtime").unwrap_err();
        assert_eq!(e.kind(), "inherited_across_fork");
        let text = e.to_string();
        assert!(text.contains("this Runtime"), "{text}");
        assert!(text.contains(&birth.pid().to_string()), "{text}");
        assert!(text.contains(&std::process::id().to_string()), "{text}");
        assert!(text.contains("spawn"), "{text}");
    }
}
