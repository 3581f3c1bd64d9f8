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

use std::marker::PhantomData;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Once};

use arc_swap::ArcSwapOption;
use parking_lot::{ArcMutexGuard, Mutex, RawMutex};

use crate::error::{Error, Result};

/// The pid [`current_pid`] answers: 0 until its first call.
static PID: AtomicU32 = AtomicU32::new(0);

/// The calling process's pid, without a system call after the first: every fork check
/// (each [`Birth::check`], each [`PerProcess::lock`]) reads it, several times per vendor
/// call, where a `getpid` costs a few hundred nanoseconds on a VM.
///
/// The value is cached, and a `pthread_atfork` child handler, registered before the cache
/// is first filled, refreshes it in every child made by `fork(2)` (the libc call, which
/// runs the handlers: Rust's `libc::fork`, Python's `os.fork` and `multiprocessing`'s fork
/// start method). A child made by a raw `clone` system call without the handlers that then
/// runs Rust code would see its parent's pid: no supported path does that.
pub fn current_pid() -> u32 {
    let pid = PID.load(Ordering::Relaxed);
    if pid != 0 {
        return pid;
    }
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        #[allow(
            unsafe_code,
            reason = "the one FFI call of this crate: see the module docs"
        )]
        // SAFETY: `pthread_atfork` with only a child handler; the handler is an
        // `extern "C"` fn that stores one atomic (async-signal-safe, as a handler run in
        // the child of a multi-threaded process must be) and is never unregistered.
        let failed = unsafe { libc::pthread_atfork(None, None, Some(refresh_after_fork)) };
        if failed != 0 {
            // Without the handler a cached pid could be stale in a child: never cache.
            PID.store(u32::MAX, Ordering::Relaxed);
        }
    });
    let pid = std::process::id();
    if PID.load(Ordering::Relaxed) == u32::MAX {
        return pid;
    }
    // A fork between the registration and this store runs the handler in the child,
    // whose copy of this thread does not exist; the parent stores its own pid.
    let _ = PID.compare_exchange(0, pid, Ordering::Relaxed, Ordering::Relaxed);
    PID.load(Ordering::Relaxed)
}

/// The `pthread_atfork` child handler: the child's own pid.
extern "C" fn refresh_after_fork() {
    if PID.load(Ordering::Relaxed) != u32::MAX {
        PID.store(std::process::id(), Ordering::Relaxed);
    }
}

/// The process an object was made in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Birth {
    pid: u32,
}

impl Birth {
    /// The calling process.
    pub fn here() -> Birth {
        Birth { pid: current_pid() }
    }

    /// The pid of the process that made the object.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Whether the calling process is not the one that made the object: a child forked
    /// after it was made (one `getpid`).
    pub fn is_inherited(&self) -> bool {
        current_pid() != self.pid
    }

    /// Refuses the use of `what` (e.g. `"this Runtime"`) in a process that inherited it
    /// across `fork`.
    pub fn check(&self, what: &'static str) -> Result<()> {
        let current = current_pid();
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

/// Process-wide state of the calling process, for a `static`: a child forked while the
/// state lived gets a fresh one at its first use, made without touching the parent's.
///
/// A `static Mutex` is unusable in a forked child when another thread of the parent held
/// it at the `fork`: the child has a copy of the locked mutex and no thread to unlock it,
/// so its first call blocks for ever. (A parent with busy threads, a `fork` from Python or
/// a framework: this is how "a fresh runtime in the child works" fails.) Here each
/// process's state lives in an instance of its own behind an atomic pointer: a process
/// that finds the instance of another pid makes a new one, and never locks the inherited
/// mutex to do so (it only *tries*, to hand what it finds to `fresh`). Inherited instances
/// are leaked, never dropped: their contents are the parent's (dropping them could
/// release the parent's objects), and the copies vanish with the child. A process's own
/// instance is reference counted: a `PerProcess` that is a field (not a `static`) frees it
/// when it is dropped and the last guard is gone, and an instance a thread made but lost
/// to another thread's is dropped at once (what `fresh` returns is the process's own).
pub struct PerProcess<T: 'static> {
    current: ArcSwapOption<Instance<T>>,
    /// Makes the state of a process: `None` at the first use, or what a forked child
    /// found in its parent's (when no thread of the parent held it at the fork).
    fresh: fn(Option<T>) -> T,
}

struct Instance<T> {
    pid: u32,
    value: Arc<Mutex<Option<T>>>,
}

/// The state of a [`PerProcess`], locked. It holds the instance it locked, so the state
/// outlives a `PerProcess` dropped meanwhile.
pub struct PerProcessGuard<'a, T>(ArcMutexGuard<RawMutex, Option<T>>, PhantomData<&'a ()>);

impl<T> std::ops::Deref for PerProcessGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.0
            .as_ref()
            .expect("a PerProcess instance is filled when it is made")
    }
}

impl<T> std::ops::DerefMut for PerProcessGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.0
            .as_mut()
            .expect("a PerProcess instance is filled when it is made")
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for PerProcessGuard<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&**self, f)
    }
}

impl<T> std::fmt::Debug for PerProcess<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PerProcess").finish_non_exhaustive()
    }
}

/// A [`PerProcess`] `fresh` function: the default value, whatever the parent had (its
/// contents are leaked, never dropped, in the child).
pub fn forget_inherited<T: Default>(inherited: Option<T>) -> T {
    std::mem::forget(inherited);
    T::default()
}

impl<T: 'static> PerProcess<T> {
    /// State made by `fresh` at each process's first use (see [`forget_inherited`]).
    pub const fn new(fresh: fn(Option<T>) -> T) -> PerProcess<T> {
        PerProcess {
            current: ArcSwapOption::const_empty(),
            fresh,
        }
    }

    /// The calling process's state, locked (made at the process's first use). There is no
    /// poisoning: every user keeps the state consistent between its own statements.
    pub fn lock(&self) -> PerProcessGuard<'static, T> {
        let me = current_pid();
        loop {
            let seen = self.current.load();
            let inherited = match seen.as_deref() {
                Some(instance) if instance.pid == me => {
                    return PerProcessGuard(instance.value.lock_arc(), PhantomData);
                }
                // Another process's: only tried, never waited for.
                Some(instance) => instance.value.try_lock().and_then(|mut v| v.take()),
                None => None,
            };
            let made = Arc::new(Instance {
                pid: me,
                value: Arc::new(Mutex::new(Some((self.fresh)(inherited)))),
            });
            let before = self
                .current
                .compare_and_swap(&*seen, Some(Arc::clone(&made)));
            let replaced = arc_swap::Guard::into_inner(before);
            let won = match (&replaced, &*seen) {
                (Some(now), Some(was)) => Arc::ptr_eq(now, was),
                (None, None) => true,
                _ => false,
            };
            if won {
                // The parent's instance is leaked, never dropped (see the type's docs).
                if let Some(parents) = replaced.filter(|i| i.pid != me) {
                    std::mem::forget(parents);
                }
            }
            // Else another thread of this process made one first: the loop uses it, and
            // ours is dropped here.
            drop(made);
        }
    }

    /// The calling process's state if it exists and no other thread holds it: for code
    /// that must never block (an `atexit` handler).
    pub fn try_lock(&self) -> Option<PerProcessGuard<'static, T>> {
        let seen = self.current.load();
        let instance = seen.as_deref()?;
        if instance.pid != current_pid() {
            return None;
        }
        instance
            .value
            .try_lock_arc()
            .map(|guard| PerProcessGuard(guard, PhantomData))
    }
}

impl<T: 'static> Drop for PerProcess<T> {
    fn drop(&mut self) {
        // An instance inherited across `fork` is the parent's: leaked, never dropped.
        if let Some(instance) = self.current.swap(None)
            && instance.pid != current_pid()
        {
            std::mem::forget(instance);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static COUNTER: PerProcess<u64> = PerProcess::new(|inherited| inherited.unwrap_or(0));

    #[test]
    fn per_process_state_is_made_once_and_shared_by_threads() {
        *COUNTER.lock() += 1;
        let threads: Vec<_> = (0..4)
            .map(|_| std::thread::spawn(|| *COUNTER.lock() += 1))
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*COUNTER.lock(), 5);
    }

    #[test]
    fn a_per_process_field_frees_its_state_once_dropped_and_unlocked() {
        static DROPS: AtomicU32 = AtomicU32::new(0);
        struct Counted;
        impl Drop for Counted {
            fn drop(&mut self) {
                DROPS.fetch_add(1, Ordering::SeqCst);
            }
        }
        let field: PerProcess<Counted> = PerProcess::new(|_| Counted);
        let guard = field.lock();
        drop(field);
        assert_eq!(DROPS.load(Ordering::SeqCst), 0, "the guard keeps the state");
        drop(guard);
        assert_eq!(DROPS.load(Ordering::SeqCst), 1, "freed, not leaked");
    }

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
