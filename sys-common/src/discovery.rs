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
//! 1. The override variable (`DEVIPC_HIP_LIB`, `DEVIPC_ASCEND_LIB`): one exact library.
//!    When set (non-empty) it is the **only** candidate: an explicit choice must not
//!    silently fall back to another runtime (e.g. from the emulator library under test to
//!    the real one). A value with a `/` is a file path, opened as is (a relative one from
//!    the current directory, as the dynamic loader does); a value without one is a
//!    library name (`libamdhip64.so.6`) that the dynamic loader searches for, as in step 3.
//!    A path that names something other than a regular file (a directory, FIFO, socket or
//!    device; symlinks are followed) is refused before the loader sees it, and a file that
//!    exists but does not load is reported as such: both are [`Error::Config`], not
//!    [`Error::LibraryNotFound`] (see [`open_first`]).
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
    /// The override variable: one exact library (a file path, or a bare name the loader
    /// searches for), the only candidate when set; see the [module docs](self).
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
///
/// A candidate that is a path (it holds a `/`) naming something other than a regular file
/// once symlinks are followed (a directory, FIFO, socket or device) is not handed to
/// `open`: loading a FIFO would block forever, and none of them is a library. A missing
/// file is handed on (the loader's message says so).
///
/// The override candidate (origin `backend.library_env_var()`, see
/// [`SearchOrder::candidates`]) is the user's explicit choice, so its failures are
/// configuration errors, not "install the runtime": when it names a path that is not a
/// regular file, or a file that exists but `open` fails on, the result is
/// [`Error::Config`] naming the variable, the path and the problem (the loader's message
/// included). A missing file or a bare name the loader cannot find stays
/// [`Error::LibraryNotFound`].
pub fn open_first<T>(
    backend: BackendKind,
    candidates: &[Candidate],
    mut open: impl FnMut(&Candidate) -> std::result::Result<T, String>,
) -> Result<(T, &Candidate)> {
    let override_var = backend.library_env_var();
    let mut tried = Vec::with_capacity(candidates.len());
    for candidate in candidates {
        let exact = candidate.origin == override_var;
        let kind = file_kind(&candidate.path);
        if let FileKind::Other(what) = kind {
            let problem = format!("is {what}, not a library file; not opened");
            if exact {
                return Err(override_error(backend, &candidate.path, &problem));
            }
            tried.push(candidate.failed(problem));
            continue;
        }
        match open(candidate) {
            Ok(value) => return Ok((value, candidate)),
            Err(error) if exact && kind == FileKind::Regular => {
                let problem =
                    format!("the file exists but the dynamic loader cannot load it ({error})");
                return Err(override_error(backend, &candidate.path, &problem));
            }
            Err(error) => tried.push(candidate.failed(error)),
        }
    }
    Err(Error::LibraryNotFound { backend, tried })
}

/// [`Error::Config`] for an override variable naming `path`, unusable for `problem`.
fn override_error(backend: BackendKind, path: &Path, problem: &str) -> Error {
    let var = backend.library_env_var();
    Error::config(
        format!("{var}={}", path.display()),
        format!(
            "{problem}; point {var} at the {backend} runtime library file, or unset it to \
             search the usual install locations"
        ),
    )
}

/// What a candidate's path is, as far as loading goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FileKind {
    /// A regular file (after following symlinks).
    Regular,
    /// Something else that exists: a directory, FIFO, socket or device (the words for a
    /// message).
    Other(&'static str),
    /// A bare name (for the loader's search), or a path that cannot be looked at
    /// (missing, a symlink loop, no permission): the loader says what is wrong.
    Unknown,
}

/// What `path` is: only paths with a `/` are looked at (a bare name is the loader's to
/// search for), following symlinks.
fn file_kind(path: &Path) -> FileKind {
    use std::os::unix::fs::FileTypeExt;
    if !path.as_os_str().as_encoded_bytes().contains(&b'/') {
        return FileKind::Unknown;
    }
    let Ok(meta) = std::fs::metadata(path) else {
        return FileKind::Unknown;
    };
    let t = meta.file_type();
    if t.is_file() {
        FileKind::Regular
    } else if t.is_dir() {
        FileKind::Other("a directory")
    } else if t.is_fifo() {
        FileKind::Other("a FIFO (named pipe)")
    } else if t.is_socket() {
        FileKind::Other("a socket")
    } else if t.is_char_device() {
        FileKind::Other("a character device")
    } else if t.is_block_device() {
        FileKind::Other("a block device")
    } else {
        FileKind::Other("not a regular file")
    }
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

    /// A fresh directory under the temp dir, removed on drop.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(name: &str) -> Scratch {
            let dir = std::env::temp_dir()
                .join(format!("devipc-sys-common-{}-{name}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            Scratch(dir)
        }

        /// One of each kind of path an override may name by mistake, and a regular file.
        fn fixtures(&self) -> Vec<(PathBuf, &'static str)> {
            let fifo = self.0.join("fifo.so");
            let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
            // SAFETY: a valid NUL-terminated path; mkfifo(3) only creates a file.
            assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
            let socket = self.0.join("socket.so");
            let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
            std::mem::forget(listener);
            let dir = self.0.join("dir.so");
            std::fs::create_dir(&dir).unwrap();
            let link = self.0.join("link-to-fifo.so");
            std::os::unix::fs::symlink(&fifo, &link).unwrap();
            vec![
                (fifo, "a FIFO (named pipe)"),
                (socket, "a socket"),
                (dir, "a directory"),
                (PathBuf::from("/dev/null"), "a character device"),
                (link, "a FIFO (named pipe)"),
            ]
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn override_of(path: &Path) -> Vec<Candidate> {
        ORDER.candidates(|k| (k == "DEVIPC_ASCEND_LIB").then(|| path.as_os_str().to_owned()))
    }

    #[test]
    fn an_override_that_is_not_a_regular_file_is_refused_before_loading() {
        let scratch = Scratch::new("not-regular");
        for (path, what) in scratch.fixtures() {
            let list = override_of(&path);
            assert_eq!(list.len(), 1);
            let mut opened = false;
            let err = open_first(BackendKind::Ascend, &list, |_| {
                opened = true;
                Err::<(), _>("the loader ran".to_owned())
            })
            .unwrap_err();
            assert!(!opened, "{}: handed to the loader", path.display());
            let Error::Config {
                what: setting,
                problem,
            } = &err
            else {
                panic!("{}: expected Config, got {err:?}", path.display())
            };
            assert_eq!(*setting, format!("DEVIPC_ASCEND_LIB={}", path.display()));
            assert!(
                problem.starts_with(&format!("is {what}, not a library file")),
                "{problem}"
            );
            assert!(
                err.to_string().contains("point DEVIPC_ASCEND_LIB at"),
                "{err}"
            );
        }
    }

    #[test]
    fn other_candidates_that_are_not_regular_files_are_skipped_and_recorded() {
        let scratch = Scratch::new("skipped");
        let fixtures = scratch.fixtures();
        let mut list: Vec<Candidate> = fixtures
            .iter()
            .map(|(p, _)| Candidate::new(p, "$ROOT_A/lib64"))
            .collect();
        list.push(Candidate::new("libv.so", LOADER_PATH_ORIGIN));
        let mut opened = Vec::new();
        let err = open_first(BackendKind::Ascend, &list, |c| {
            opened.push(c.path.clone());
            Err::<(), _>("no".to_owned())
        })
        .unwrap_err();
        assert_eq!(opened, [PathBuf::from("libv.so")]);
        let Error::LibraryNotFound { tried, .. } = err else {
            panic!("unexpected {err:?}")
        };
        assert_eq!(tried.len(), list.len());
        for (attempt, (path, what)) in tried.iter().zip(&fixtures) {
            assert_eq!(attempt.path, *path);
            assert_eq!(
                attempt.error,
                format!("is {what}, not a library file; not opened")
            );
        }
    }

    #[test]
    fn an_existing_override_that_does_not_load_says_it_exists() {
        let scratch = Scratch::new("unloadable");
        let text = scratch.0.join("text.so");
        std::fs::write(&text, "not a library\n").unwrap();
        let err = open_first(BackendKind::Ascend, &override_of(&text), |_| {
            Err::<(), _>("invalid ELF header".to_owned())
        })
        .unwrap_err();
        let Error::Config { what, problem } = &err else {
            panic!("expected Config, got {err:?}")
        };
        assert_eq!(*what, format!("DEVIPC_ASCEND_LIB={}", text.display()));
        assert!(
            problem.starts_with(
                "the file exists but the dynamic loader cannot load it (invalid ELF header)"
            ),
            "{problem}"
        );
        // A missing file, and a bare name the loader does not find, are not found.
        for missing in [
            scratch.0.join("missing.so"),
            PathBuf::from("libv-missing.so"),
        ] {
            let err = open_first(BackendKind::Ascend, &override_of(&missing), |_| {
                Err::<(), _>("No such file or directory".to_owned())
            })
            .unwrap_err();
            assert!(
                matches!(&err, Error::LibraryNotFound { tried, .. } if tried.len() == 1),
                "{err:?}"
            );
        }
    }
}
