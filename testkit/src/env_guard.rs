//! [`EnvGuard`]: environment variables set or removed for a test's duration, and restored
//! afterwards.

use std::ffi::{OsStr, OsString};

/// Sets or removes environment variables of this process for the life of the guard, and
/// restores each one's former value (or absence) when the guard is dropped, the last
/// changed first, so a variable named twice ends as it began.
///
/// Changing the environment races with every other thread that reads or writes it,
/// including the dynamic loader (`LD_LIBRARY_PATH`) and anything that calls `getenv`, so
/// [`EnvGuard::set`] is `unsafe`. A test that uses a guard is `#[serial]`
/// (`serial_test`), and every other test of its binary that reads the environment, loads
/// libraries or starts processes is `#[serial]` or `#[parallel]` (never beside a
/// `#[serial]` one), so that no other test thread runs while the guard lives.
///
/// ```no_run
/// use std::ffi::OsStr;
///
/// use devipc_testkit::EnvGuard;
///
/// // In a `#[serial]` test:
/// // SAFETY: no other test thread runs beside a #[serial] test (see above).
/// let _env = unsafe {
///     EnvGuard::set(&[
///         ("DEVIPC_ASCEND_LIB", Some(OsStr::new("/no/such/libascendcl.so"))),
///         ("ASCEND_HOME_PATH", None),
///     ])
/// };
/// // ... both are restored when `_env` drops, also when the test panics.
/// ```
#[derive(Debug)]
#[must_use = "the variables are restored when the guard is dropped"]
pub struct EnvGuard {
    saved: Vec<(&'static str, Option<OsString>)>,
}

impl EnvGuard {
    /// Sets each `(name, Some(value))` and removes each `(name, None)`, in order, keeping
    /// the former values for the drop.
    ///
    /// # Safety
    /// No other thread may read or write the process environment (or run the dynamic
    /// loader) from this call until the guard's drop has returned: see [`EnvGuard`] for
    /// how the tests that use it are serialised.
    pub unsafe fn set(vars: &[(&'static str, Option<&OsStr>)]) -> Self {
        let mut saved = Vec::with_capacity(vars.len());
        for (key, value) in vars {
            saved.push((*key, std::env::var_os(key)));
            // SAFETY: the caller guarantees that no other thread uses the environment.
            unsafe { put(key, *value) };
        }
        EnvGuard { saved }
    }
}

impl Drop for EnvGuard {
    fn drop(&mut self) {
        for (key, value) in self.saved.drain(..).rev() {
            // SAFETY: `EnvGuard::set`'s caller guaranteed that no other thread uses the
            // environment until this drop returns.
            unsafe { put(key, value.as_deref()) };
        }
    }
}

/// Sets `key` to `value`, or removes it for `None`.
///
/// # Safety
/// As [`EnvGuard::set`].
unsafe fn put(key: &str, value: Option<&OsStr>) {
    // SAFETY: the caller guarantees that no other thread uses the environment.
    unsafe {
        match value {
            Some(v) => std::env::set_var(key, v),
            None => std::env::remove_var(key),
        }
    }
}
