//! Where to look for a vendor library, and the loop that tries each place.
//!
//! A sys crate describes its vendor's install layout as a [`SearchOrder`] (data); this
//! module turns it into the ordered [`Candidate`] list for an environment, as a pure
//! function of an injected lookup, so the order is table-tested without touching the
//! process environment. [`open_first`] walks such a list with any opener and collects a
//! [`LoadAttempt`] per failure, so "nothing found" is an [`Error::LibraryNotFound`] that
//! names every path and loader error, never a panic.
//!
//! Every vendor is searched the same way (DESIGN section 8):
//! 1. The override variable (`DEVIPC_HIP_LIB`, `DEVIPC_ASCEND_LIB`): one exact file. When
//!    set (non-empty) it is the **only** candidate: an explicit choice must not silently
//!    fall back to another runtime (e.g. from the emulator library under test to the real
//!    one).
//! 2. Each install-root variable's library directory (`$ROCM_PATH/lib`,
//!    `$ASCEND_HOME_PATH/lib64`, ...), then the vendor's default install directories: in
//!    each directory the library names in order.
//! 3. The same names bare, resolved by the dynamic loader's own search (`LD_LIBRARY_PATH`,
//!    `ld.so.cache`), with origin [`LOADER_PATH_ORIGIN`].
//!
//! Unset or empty variables are skipped; a path that appears twice is tried once, under
//! the origin that listed it first.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use devipc_core::{BackendKind, Error, LoadAttempt, Result};

/// Origin of the bare-name candidates, resolved by the dynamic loader's search path
/// (`LD_LIBRARY_PATH`, `ld.so.cache`).
pub const LOADER_PATH_ORIGIN: &str = "loader search path";

/// One place to try loading a vendor library from, and why it is on the list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// What to pass to the dynamic loader: a path with a directory (opened as is), or a
    /// bare file name (searched by the loader).
    pub path: PathBuf,
    /// Where the candidate came from, e.g. `DEVIPC_HIP_LIB`, `$ASCEND_HOME_PATH/lib64`
    /// or `default ROCm install`; becomes [`LoadAttempt::origin`].
    pub origin: String,
}

impl Candidate {
    /// A candidate `path` listed because of `origin`.
    pub fn new(path: impl Into<PathBuf>, origin: impl Into<String>) -> Self {
        Candidate {
            path: path.into(),
            origin: origin.into(),
        }
    }

    /// A [`LoadAttempt`] recording that this candidate failed with `error`.
    pub fn failed(&self, error: impl Into<String>) -> LoadAttempt {
        LoadAttempt {
            path: self.path.clone(),
            origin: self.origin.clone(),
            error: error.into(),
        }
    }
}

/// A vendor's install layout: where its runtime library may be, as data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SearchOrder {
    /// The backend; its [`library_env_var`](BackendKind::library_env_var) is the override
    /// and it is named in [`Error::LibraryNotFound`].
    pub backend: BackendKind,
    /// Variables naming an install root, in order.
    pub root_env_vars: &'static [&'static str],
    /// The library directory under each root (`lib`, `lib64`).
    pub root_lib_dir: &'static str,
    /// The vendor installers' default library directories, in order, each with its
    /// origin (e.g. `default ROCm install`).
    pub default_dirs: &'static [(&'static str, &'static str)],
    /// Library file names, in the order tried within each directory and on the loader
    /// path.
    pub library_names: &'static [&'static str],
}

impl SearchOrder {
    /// The override variable: one exact file, the only candidate when set.
    pub const fn override_env_var(&self) -> &'static str {
        self.backend.library_env_var()
    }

    /// Every candidate, in discovery order, for the environment `env` (a lookup such as
    /// `|k| std::env::var_os(k)`); see the [module docs](self) for the order.
    pub fn candidates(&self, env: impl Fn(&str) -> Option<OsString>) -> Vec<Candidate> {
        let get = |key: &str| env(key).filter(|v| !v.is_empty());

        let override_var = self.override_env_var();
        if let Some(exact) = get(override_var) {
            return vec![Candidate::new(exact, override_var)];
        }

        let mut out: Vec<Candidate> = Vec::new();
        let mut push = |path: PathBuf, origin: &dyn Fn() -> String| {
            if !out.iter().any(|seen| seen.path == path) {
                out.push(Candidate::new(path, origin()));
            }
        };
        for var in self.root_env_vars {
            if let Some(root) = get(var) {
                let dir = Path::new(&root).join(self.root_lib_dir);
                for name in self.library_names {
                    push(dir.join(name), &|| format!("${var}/{}", self.root_lib_dir));
                }
            }
        }
        for (dir, origin) in self.default_dirs {
            for name in self.library_names {
                push(Path::new(dir).join(name), &|| (*origin).to_owned());
            }
        }
        for name in self.library_names {
            push(PathBuf::from(name), &|| LOADER_PATH_ORIGIN.to_owned());
        }
        out
    }
}

/// Tries `open` on each candidate in order and returns the first success with its
/// candidate. Every failure is recorded; if none succeeds the result is
/// [`Error::LibraryNotFound`] for `backend`, listing them all.
pub fn open_first<T>(
    backend: BackendKind,
    candidates: &[Candidate],
    mut open: impl FnMut(&Candidate) -> std::result::Result<T, String>,
) -> Result<(T, &Candidate)> {
    let mut tried = Vec::with_capacity(candidates.len());
    for candidate in candidates {
        match open(candidate) {
            Ok(value) => return Ok((value, candidate)),
            Err(error) => tried.push(candidate.failed(error)),
        }
    }
    Err(Error::LibraryNotFound { backend, tried })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    const ORDER: SearchOrder = SearchOrder {
        backend: BackendKind::Ascend,
        root_env_vars: &["ROOT_A", "ROOT_B"],
        root_lib_dir: "lib64",
        default_dirs: &[("/opt/v/lib64", "default v install")],
        library_names: &["libv.so", "libv2.so"],
    };

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> + use<> {
        let map: HashMap<String, OsString> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), OsString::from(v)))
            .collect();
        move |k| map.get(k).cloned()
    }

    fn listed(env: &[(&str, &str)]) -> Vec<(String, String)> {
        ORDER
            .candidates(env_of(env))
            .into_iter()
            .map(|c| (c.path.display().to_string(), c.origin))
            .collect()
    }

    fn owned(rows: &[(&str, &str)]) -> Vec<(String, String)> {
        rows.iter()
            .map(|(p, o)| ((*p).to_owned(), (*o).to_owned()))
            .collect()
    }

    #[test]
    fn generic_order() {
        assert_eq!(
            listed(&[("ROOT_B", "/b"), ("ROOT_A", "/a")]),
            owned(&[
                ("/a/lib64/libv.so", "$ROOT_A/lib64"),
                ("/a/lib64/libv2.so", "$ROOT_A/lib64"),
                ("/b/lib64/libv.so", "$ROOT_B/lib64"),
                ("/b/lib64/libv2.so", "$ROOT_B/lib64"),
                ("/opt/v/lib64/libv.so", "default v install"),
                ("/opt/v/lib64/libv2.so", "default v install"),
                ("libv.so", LOADER_PATH_ORIGIN),
                ("libv2.so", LOADER_PATH_ORIGIN),
            ])
        );
        assert_eq!(
            listed(&[("DEVIPC_ASCEND_LIB", "/x/libv.so"), ("ROOT_A", "/a")]),
            owned(&[("/x/libv.so", "DEVIPC_ASCEND_LIB")])
        );
        assert_eq!(
            listed(&[("ROOT_A", "/opt/v"), ("DEVIPC_ASCEND_LIB", "")]),
            owned(&[
                ("/opt/v/lib64/libv.so", "$ROOT_A/lib64"),
                ("/opt/v/lib64/libv2.so", "$ROOT_A/lib64"),
                ("libv.so", LOADER_PATH_ORIGIN),
                ("libv2.so", LOADER_PATH_ORIGIN),
            ])
        );
    }

    #[test]
    fn open_first_records_every_failure() {
        let list = ORDER.candidates(env_of(&[]));
        let err = open_first(BackendKind::Hip, &list, |c| {
            Err::<(), _>(format!("cannot open {}", c.path.display()))
        })
        .unwrap_err();
        let Error::LibraryNotFound { backend, tried } = err else {
            panic!("unexpected {err:?}")
        };
        assert_eq!(backend, BackendKind::Hip);
        assert_eq!(tried.len(), list.len());
        for (attempt, candidate) in tried.iter().zip(&list) {
            assert_eq!(attempt.path, candidate.path);
            assert_eq!(attempt.origin, candidate.origin);
            assert_eq!(
                attempt.error,
                format!("cannot open {}", candidate.path.display())
            );
        }
    }

    #[test]
    fn open_first_stops_at_the_first_success() {
        let list = ORDER.candidates(env_of(&[]));
        let mut calls = 0;
        let (value, chosen) = open_first(BackendKind::Ascend, &list, |c| {
            calls += 1;
            if c.origin == LOADER_PATH_ORIGIN {
                Ok(c.path.clone())
            } else {
                Err("no".to_owned())
            }
        })
        .unwrap();
        assert_eq!(value, PathBuf::from("libv.so"));
        assert_eq!(chosen.origin, LOADER_PATH_ORIGIN);
        assert_eq!(calls, 3);
    }

    #[test]
    fn no_candidates_is_library_not_found_with_empty_list() {
        let err = open_first(BackendKind::Ascend, &[], |_| Ok::<(), String>(())).unwrap_err();
        assert!(matches!(err, Error::LibraryNotFound { ref tried, .. } if tried.is_empty()));
    }
}
