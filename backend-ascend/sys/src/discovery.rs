//! Where to look for the ACL runtime library, in which order (DESIGN section 8).
//!
//! [`candidates`] is a pure function of an environment lookup: it lists every path
//! [`AclApi::discover`](crate::AclApi::discover) will hand to the dynamic loader, with
//! where each came from, so the order is table-tested without touching the process
//! environment. [`open_first`] walks such a list with any opener and collects a
//! [`LoadAttempt`] per failure, so "nothing found" is an [`Error::LibraryNotFound`]
//! that names every path and loader error, never a panic.
//!
//! Order: `DEVIPC_ASCEND_LIB` (one exact file); `$ASCEND_HOME_PATH/lib64`;
//! `$ASCEND_TOOLKIT_HOME/lib64`; `/usr/local/Ascend/cann/lib64` (CANN >= 8.5 default);
//! `/usr/local/Ascend/ascend-toolkit/latest/lib64` (CANN <= 8.3 default); then the bare
//! names on the loader's own search path. In each directory `libascendcl.so` comes before
//! `libacl_rt.so`: torch_npu resolves every IPC symbol from `libascendcl`, which all CANN
//! versions ship, while `libacl_rt.so` is its CANN >= 8.5 successor (api-facts A.2).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use devipc_core::{BackendKind, Error, LoadAttempt, Result};

/// The environment variable naming the ACL library file exactly; tried first.
pub const LIBRARY_ENV_VAR: &str = BackendKind::Ascend.library_env_var();

/// Library file names, in the order tried within each directory and on the loader path.
pub const LIBRARY_NAMES: [&str; 2] = ["libascendcl.so", "libacl_rt.so"];

/// Environment variables naming a CANN install root whose `lib64` holds the library, in
/// order. `set_env.sh` sets both, usually to the same directory.
pub const INSTALL_ROOT_ENV_VARS: [&str; 2] = ["ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME"];

/// Default library directories of the vendor installers, in order, with a description.
pub const DEFAULT_LIBRARY_DIRS: [(&str, &str); 2] = [
    (
        "/usr/local/Ascend/cann/lib64",
        "default CANN >= 8.5 install (/usr/local/Ascend/cann)",
    ),
    (
        "/usr/local/Ascend/ascend-toolkit/latest/lib64",
        "default CANN <= 8.3 install (/usr/local/Ascend/ascend-toolkit/latest)",
    ),
];

/// Origin of the bare-name candidates.
pub const LOADER_PATH_ORIGIN: &str = "dynamic loader search path (LD_LIBRARY_PATH, ld.so.cache)";

/// One path to try, and why it is on the list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// What to pass to the dynamic loader: a path, or a bare file name for the loader's
    /// own search.
    pub path: PathBuf,
    /// Where the candidate came from, e.g. `$ASCEND_HOME_PATH/lib64`.
    pub origin: String,
}

impl Candidate {
    /// A [`LoadAttempt`] recording that this candidate failed with `error`.
    pub fn failed(&self, error: impl Into<String>) -> LoadAttempt {
        LoadAttempt {
            path: self.path.clone(),
            origin: self.origin.clone(),
            error: error.into(),
        }
    }
}

/// Every candidate, in discovery order, for the environment `env` (a lookup such as
/// `|k| std::env::var_os(k)`). Unset or empty variables add nothing; a path that appears
/// twice (e.g. `ASCEND_HOME_PATH` = `ASCEND_TOOLKIT_HOME`) is listed once, first origin
/// kept.
pub fn candidates(env: impl Fn(&str) -> Option<OsString>) -> Vec<Candidate> {
    let get = |key: &str| env(key).filter(|v| !v.is_empty());
    let mut out: Vec<Candidate> = Vec::new();
    let mut push = |path: PathBuf, origin: String| {
        if !out.iter().any(|c| c.path == path) {
            out.push(Candidate { path, origin });
        }
    };

    if let Some(file) = get(LIBRARY_ENV_VAR) {
        push(PathBuf::from(file), LIBRARY_ENV_VAR.to_owned());
    }
    for var in INSTALL_ROOT_ENV_VARS {
        if let Some(root) = get(var) {
            let dir = Path::new(&root).join("lib64");
            for name in LIBRARY_NAMES {
                push(dir.join(name), format!("${var}/lib64"));
            }
        }
    }
    for (dir, origin) in DEFAULT_LIBRARY_DIRS {
        for name in LIBRARY_NAMES {
            push(Path::new(dir).join(name), origin.to_owned());
        }
    }
    for name in LIBRARY_NAMES {
        push(PathBuf::from(name), LOADER_PATH_ORIGIN.to_owned());
    }
    out
}

/// Tries `open` on each candidate in order and returns the first success with its
/// candidate. Every failure is recorded; if none succeeds the result is
/// [`Error::LibraryNotFound`] for Ascend listing them all.
pub fn open_first<T>(
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
    Err(Error::LibraryNotFound {
        backend: BackendKind::Ascend,
        tried,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> + use<> {
        let map: HashMap<String, OsString> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), OsString::from(v)))
            .collect();
        move |k| map.get(k).cloned()
    }

    fn listed(env: &[(&str, &str)]) -> Vec<(String, String)> {
        candidates(env_of(env))
            .into_iter()
            .map(|c| (c.path.display().to_string(), c.origin))
            .collect()
    }

    const DEFAULTS: [(&str, &str); 6] = [
        (
            "/usr/local/Ascend/cann/lib64/libascendcl.so",
            "default CANN >= 8.5 install (/usr/local/Ascend/cann)",
        ),
        (
            "/usr/local/Ascend/cann/lib64/libacl_rt.so",
            "default CANN >= 8.5 install (/usr/local/Ascend/cann)",
        ),
        (
            "/usr/local/Ascend/ascend-toolkit/latest/lib64/libascendcl.so",
            "default CANN <= 8.3 install (/usr/local/Ascend/ascend-toolkit/latest)",
        ),
        (
            "/usr/local/Ascend/ascend-toolkit/latest/lib64/libacl_rt.so",
            "default CANN <= 8.3 install (/usr/local/Ascend/ascend-toolkit/latest)",
        ),
        ("libascendcl.so", LOADER_PATH_ORIGIN),
        ("libacl_rt.so", LOADER_PATH_ORIGIN),
    ];

    fn owned(rows: &[(&str, &str)]) -> Vec<(String, String)> {
        rows.iter()
            .map(|(p, o)| ((*p).to_owned(), (*o).to_owned()))
            .collect()
    }

    #[test]
    fn order_table() {
        struct Case {
            what: &'static str,
            env: &'static [(&'static str, &'static str)],
            first: &'static [(&'static str, &'static str)],
        }
        let cases = [
            Case {
                what: "empty environment: defaults then loader path",
                env: &[],
                first: &[],
            },
            Case {
                what: "empty values count as unset",
                env: &[
                    ("DEVIPC_ASCEND_LIB", ""),
                    ("ASCEND_HOME_PATH", ""),
                    ("ASCEND_TOOLKIT_HOME", ""),
                ],
                first: &[],
            },
            Case {
                what: "override comes first, as one exact file",
                env: &[("DEVIPC_ASCEND_LIB", "/opt/x/libmine.so")],
                first: &[("/opt/x/libmine.so", "DEVIPC_ASCEND_LIB")],
            },
            Case {
                what: "every source, in DESIGN order",
                env: &[
                    ("DEVIPC_ASCEND_LIB", "/opt/x/libmine.so"),
                    ("ASCEND_HOME_PATH", "/home/cann"),
                    ("ASCEND_TOOLKIT_HOME", "/tk"),
                ],
                first: &[
                    ("/opt/x/libmine.so", "DEVIPC_ASCEND_LIB"),
                    ("/home/cann/lib64/libascendcl.so", "$ASCEND_HOME_PATH/lib64"),
                    ("/home/cann/lib64/libacl_rt.so", "$ASCEND_HOME_PATH/lib64"),
                    ("/tk/lib64/libascendcl.so", "$ASCEND_TOOLKIT_HOME/lib64"),
                    ("/tk/lib64/libacl_rt.so", "$ASCEND_TOOLKIT_HOME/lib64"),
                ],
            },
            Case {
                what: "set_env.sh sets both roots to one directory: listed once",
                env: &[
                    ("ASCEND_HOME_PATH", "/usr/local/Ascend/cann-9.0.0"),
                    ("ASCEND_TOOLKIT_HOME", "/usr/local/Ascend/cann-9.0.0"),
                ],
                first: &[
                    (
                        "/usr/local/Ascend/cann-9.0.0/lib64/libascendcl.so",
                        "$ASCEND_HOME_PATH/lib64",
                    ),
                    (
                        "/usr/local/Ascend/cann-9.0.0/lib64/libacl_rt.so",
                        "$ASCEND_HOME_PATH/lib64",
                    ),
                ],
            },
            Case {
                what: "a root equal to a default dir is not repeated",
                env: &[("ASCEND_TOOLKIT_HOME", "/usr/local/Ascend/cann")],
                first: &[
                    (
                        "/usr/local/Ascend/cann/lib64/libascendcl.so",
                        "$ASCEND_TOOLKIT_HOME/lib64",
                    ),
                    (
                        "/usr/local/Ascend/cann/lib64/libacl_rt.so",
                        "$ASCEND_TOOLKIT_HOME/lib64",
                    ),
                ],
            },
            Case {
                what: "trailing slash on a root",
                env: &[("ASCEND_HOME_PATH", "/r/")],
                first: &[
                    ("/r/lib64/libascendcl.so", "$ASCEND_HOME_PATH/lib64"),
                    ("/r/lib64/libacl_rt.so", "$ASCEND_HOME_PATH/lib64"),
                ],
            },
            Case {
                what: "a bare override name goes to the loader's search",
                env: &[("DEVIPC_ASCEND_LIB", "libascendcl.so")],
                first: &[("libascendcl.so", "DEVIPC_ASCEND_LIB")],
            },
        ];
        for case in cases {
            let mut expected = owned(case.first);
            for row in owned(&DEFAULTS) {
                if !expected.iter().any(|(p, _)| *p == row.0) {
                    expected.push(row);
                }
            }
            assert_eq!(listed(case.env), expected, "{}", case.what);
        }
    }

    #[test]
    fn unrelated_variables_are_ignored() {
        assert_eq!(
            listed(&[("LD_LIBRARY_PATH", "/x"), ("ASCEND_OPP_PATH", "/y")]),
            owned(&DEFAULTS)
        );
    }

    #[test]
    fn open_first_records_every_failure() {
        let list = candidates(env_of(&[("DEVIPC_ASCEND_LIB", "/nope/lib.so")]));
        let err = open_first(&list, |c| {
            Err::<(), _>(format!("cannot open {}", c.path.display()))
        })
        .unwrap_err();
        let Error::LibraryNotFound { backend, tried } = err else {
            panic!("unexpected {err:?}")
        };
        assert_eq!(backend, BackendKind::Ascend);
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
        let list = candidates(env_of(&[]));
        let mut calls = 0;
        let (value, chosen) = open_first(&list, |c| {
            calls += 1;
            if c.origin == LOADER_PATH_ORIGIN {
                Ok(c.path.clone())
            } else {
                Err("no".to_owned())
            }
        })
        .unwrap();
        assert_eq!(value, PathBuf::from("libascendcl.so"));
        assert_eq!(chosen.origin, LOADER_PATH_ORIGIN);
        assert_eq!(calls, 5);
    }

    #[test]
    fn no_candidates_is_library_not_found_with_empty_list() {
        let err = open_first(&[], |_| Ok::<(), String>(())).unwrap_err();
        assert!(matches!(err, Error::LibraryNotFound { ref tried, .. } if tried.is_empty()));
    }
}
