//! Where to look for the ACL runtime library: the Ascend [`SearchOrder`] (DESIGN
//! section 8).
//!
//! Data only: the walk is `devipc_sys_common`'s, the same for both vendors, a pure
//! function of an injected environment lookup, so the order is table-tested without
//! touching the process environment. [`AclApi::discover`](crate::AclApi::discover) feeds
//! [`candidates`] the real environment and tries each candidate with the dynamic loader,
//! recording a [`LoadAttempt`](devipc_core::LoadAttempt) per failure, so "nothing found"
//! is an `Error::LibraryNotFound` that names every path and loader error, never a panic.
//!
//! Order: `DEVIPC_ASCEND_LIB` (one exact library; when set, the **only** candidate, as
//! `DEVIPC_HIP_LIB` is for HIP: an explicit choice must not silently fall back to another
//! runtime. A value with a `/` is a file path, a relative one from the current directory;
//! one without is a library name the dynamic loader searches for. A path that is not a
//! regular file is refused before loading, and a file that exists but does not load is
//! reported as such, both as `Error::Config`: [`devipc_sys_common::open_first`]);
//! `$ASCEND_HOME_PATH/lib64`; `$ASCEND_TOOLKIT_HOME/lib64`;
//! `/usr/local/Ascend/cann/lib64` (CANN >= 8.5 default);
//! `/usr/local/Ascend/ascend-toolkit/latest/lib64` (CANN <= 8.3 default); then the bare
//! names on the loader's own search path ([`LOADER_PATH_ORIGIN`]). In each directory
//! `libascendcl.so` comes before `libacl_rt.so`: torch_npu resolves every IPC symbol from
//! `libascendcl`, which all CANN versions ship, while `libacl_rt.so` is its CANN >= 8.5
//! successor (api-facts A.2).

use std::ffi::OsString;

use devipc_core::BackendKind;
pub use devipc_sys_common::{Candidate, LOADER_PATH_ORIGIN, SearchOrder};

/// The environment variable naming the ACL library exactly, as a file path or a bare name
/// for the loader's search (the only candidate when set).
pub const LIBRARY_ENV_VAR: &str = BackendKind::Ascend.library_env_var();

/// Environment variables naming a CANN install root whose `lib64` holds the library, in
/// order. `set_env.sh` sets both, usually to the same directory.
pub const INSTALL_ROOT_ENV_VARS: [&str; 2] = ["ASCEND_HOME_PATH", "ASCEND_TOOLKIT_HOME"];

/// Default library directories of the vendor installers, in order, each with its origin.
pub const DEFAULT_LIBRARY_DIRS: [(&str, &str); 2] = [
    (
        "/usr/local/Ascend/cann/lib64",
        "default CANN >= 8.5 install",
    ),
    (
        "/usr/local/Ascend/ascend-toolkit/latest/lib64",
        "default CANN <= 8.3 install",
    ),
];

/// Library file names, in the order tried within each directory and on the loader path.
pub const LIBRARY_NAMES: [&str; 2] = ["libascendcl.so", "libacl_rt.so"];

/// The Ascend search order, as data.
pub const SEARCH_ORDER: SearchOrder = SearchOrder {
    backend: BackendKind::Ascend,
    root_env_vars: &INSTALL_ROOT_ENV_VARS,
    root_lib_dir: "lib64",
    default_dirs: &DEFAULT_LIBRARY_DIRS,
    library_names: &LIBRARY_NAMES,
};

/// Every candidate, in discovery order, for the environment `env` (a lookup such as
/// `|k| std::env::var_os(k)`). Unset or empty variables add nothing; a path that appears
/// twice (e.g. `ASCEND_HOME_PATH` = `ASCEND_TOOLKIT_HOME`) is listed once, first origin
/// kept.
pub fn candidates(env: impl Fn(&str) -> Option<OsString>) -> Vec<Candidate> {
    SEARCH_ORDER.candidates(env)
}

/// [`candidates`] for the environment of this process.
pub fn candidates_from_process_env() -> Vec<Candidate> {
    candidates(|key| std::env::var_os(key))
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
            "default CANN >= 8.5 install",
        ),
        (
            "/usr/local/Ascend/cann/lib64/libacl_rt.so",
            "default CANN >= 8.5 install",
        ),
        (
            "/usr/local/Ascend/ascend-toolkit/latest/lib64/libascendcl.so",
            "default CANN <= 8.3 install",
        ),
        (
            "/usr/local/Ascend/ascend-toolkit/latest/lib64/libacl_rt.so",
            "default CANN <= 8.3 install",
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
                what: "the override is the only candidate, whatever else is set",
                env: &[
                    ("DEVIPC_ASCEND_LIB", "/opt/x/libmine.so"),
                    ("ASCEND_HOME_PATH", "/home/cann"),
                    ("ASCEND_TOOLKIT_HOME", "/tk"),
                ],
                first: &[("/opt/x/libmine.so", "DEVIPC_ASCEND_LIB")],
            },
            Case {
                what: "every other source, in DESIGN order",
                env: &[
                    ("ASCEND_HOME_PATH", "/home/cann"),
                    ("ASCEND_TOOLKIT_HOME", "/tk"),
                ],
                first: &[
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
            // A set override is the only candidate (as for HIP); otherwise the defaults
            // follow.
            let exclusive = case
                .env
                .iter()
                .any(|(k, v)| *k == LIBRARY_ENV_VAR && !v.is_empty());
            for row in owned(&DEFAULTS).into_iter().filter(|_| !exclusive) {
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
}
