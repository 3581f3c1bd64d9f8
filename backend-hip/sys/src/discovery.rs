//! Where to look for `libamdhip64`: the ordered candidate list of DESIGN section 8.
//!
//! Pure logic over an injected environment lookup, so the order is table-tested without
//! touching the process environment. [`HipApi::discover`](crate::HipApi::discover) feeds
//! [`candidates`] the real environment and tries each candidate with the dynamic loader,
//! recording a [`LoadAttempt`](devipc_core::LoadAttempt) per failure.
//!
//! Order:
//! 1. `DEVIPC_HIP_LIB`: one exact file. When set (non-empty) it is the **only** candidate:
//!    an explicit choice must not silently fall back to another runtime (e.g. the emulator
//!    library under test to the real one).
//! 2. `$ROCM_PATH/lib`, `$HIP_PATH/lib`, `/opt/rocm/lib`: in each directory the names
//!    [`LIBRARY_NAMES`] in order.
//! 3. The same names bare, resolved by the dynamic loader's own search (`LD_LIBRARY_PATH`,
//!    `ld.so.cache`, e.g. Debian's `/usr/lib/x86_64-linux-gnu/libamdhip64.so.5`).
//!
//! Unset or empty variables are skipped; a path that appears twice is tried once, under
//! the origin that listed it first.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Environment variable naming the HIP library file exactly.
pub const ENV_HIP_LIB: &str = "DEVIPC_HIP_LIB";
/// Environment variable naming the ROCm install root (its `lib` directory is searched).
pub const ENV_ROCM_PATH: &str = "ROCM_PATH";
/// Environment variable naming the HIP install root (its `lib` directory is searched).
pub const ENV_HIP_PATH: &str = "HIP_PATH";
/// The default ROCm library directory.
pub const DEFAULT_ROCM_LIB_DIR: &str = "/opt/rocm/lib";
/// Origin recorded for the bare names resolved by the dynamic loader's search path.
pub const ORIGIN_LOADER_PATH: &str = "loader search path";

/// File names of the HIP runtime, tried in this order in every directory and on the
/// loader path: the development symlink, then the ROCm 6 and ROCm 5 sonames
/// (api-facts B.1).
pub const LIBRARY_NAMES: [&str; 4] = [
    "libamdhip64.so",
    "libamdhip64.so.7",
    "libamdhip64.so.6",
    "libamdhip64.so.5",
];

/// One place to try loading the HIP runtime from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// A path with a directory (opened as is) or a bare file name (searched by the
    /// dynamic loader).
    pub path: PathBuf,
    /// Why this candidate is in the list, e.g. `DEVIPC_HIP_LIB` or `$ROCM_PATH/lib`;
    /// becomes [`LoadAttempt::origin`](devipc_core::LoadAttempt::origin).
    pub origin: &'static str,
}

impl Candidate {
    fn new(path: impl Into<PathBuf>, origin: &'static str) -> Self {
        Candidate {
            path: path.into(),
            origin,
        }
    }
}

/// The ordered candidate list for an environment, given as a lookup function (pass
/// `|k| std::env::var_os(k)` for the process environment).
pub fn candidates(env: impl Fn(&str) -> Option<OsString>) -> Vec<Candidate> {
    let non_empty = |key: &str| env(key).filter(|v| !v.is_empty());

    if let Some(exact) = non_empty(ENV_HIP_LIB) {
        return vec![Candidate::new(exact, ENV_HIP_LIB)];
    }

    let mut dirs: Vec<(PathBuf, &'static str)> = Vec::new();
    if let Some(root) = non_empty(ENV_ROCM_PATH) {
        dirs.push((Path::new(&root).join("lib"), "$ROCM_PATH/lib"));
    }
    if let Some(root) = non_empty(ENV_HIP_PATH) {
        dirs.push((Path::new(&root).join("lib"), "$HIP_PATH/lib"));
    }
    dirs.push((PathBuf::from(DEFAULT_ROCM_LIB_DIR), DEFAULT_ROCM_LIB_DIR));

    let mut out: Vec<Candidate> = Vec::new();
    let mut push = |c: Candidate| {
        if !out.iter().any(|seen| seen.path == c.path) {
            out.push(c);
        }
    };
    for (dir, origin) in &dirs {
        for name in LIBRARY_NAMES {
            push(Candidate::new(dir.join(name), origin));
        }
    }
    for name in LIBRARY_NAMES {
        push(Candidate::new(name, ORIGIN_LOADER_PATH));
    }
    out
}

/// [`candidates`] for the environment of this process.
pub fn candidates_from_process_env() -> Vec<Candidate> {
    candidates(|key| std::env::var_os(key))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<OsString> {
        move |key| {
            pairs
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| OsString::from(v))
        }
    }

    fn paths(c: &[Candidate]) -> Vec<(String, &'static str)> {
        c.iter()
            .map(|c| (c.path.display().to_string(), c.origin))
            .collect()
    }

    const LOADER: [(&str, &str); 4] = [
        ("libamdhip64.so", ORIGIN_LOADER_PATH),
        ("libamdhip64.so.7", ORIGIN_LOADER_PATH),
        ("libamdhip64.so.6", ORIGIN_LOADER_PATH),
        ("libamdhip64.so.5", ORIGIN_LOADER_PATH),
    ];
    const OPT: [(&str, &str); 4] = [
        ("/opt/rocm/lib/libamdhip64.so", "/opt/rocm/lib"),
        ("/opt/rocm/lib/libamdhip64.so.7", "/opt/rocm/lib"),
        ("/opt/rocm/lib/libamdhip64.so.6", "/opt/rocm/lib"),
        ("/opt/rocm/lib/libamdhip64.so.5", "/opt/rocm/lib"),
    ];

    fn expect(parts: &[&[(&str, &'static str)]]) -> Vec<(String, &'static str)> {
        parts
            .iter()
            .flat_map(|p| p.iter())
            .map(|&(p, o)| (p.to_owned(), o))
            .collect()
    }

    #[test]
    fn discovery_order_table() {
        struct Case {
            name: &'static str,
            env: &'static [(&'static str, &'static str)],
            want: Vec<(String, &'static str)>,
        }
        let cases = [
            Case {
                name: "empty environment",
                env: &[],
                want: expect(&[&OPT, &LOADER]),
            },
            Case {
                name: "explicit file wins alone",
                env: &[
                    ("DEVIPC_HIP_LIB", "/x/libemu.so"),
                    ("ROCM_PATH", "/r"),
                    ("HIP_PATH", "/h"),
                ],
                want: expect(&[&[("/x/libemu.so", "DEVIPC_HIP_LIB")]]),
            },
            Case {
                name: "empty override is ignored",
                env: &[("DEVIPC_HIP_LIB", "")],
                want: expect(&[&OPT, &LOADER]),
            },
            Case {
                name: "ROCM_PATH then HIP_PATH then /opt/rocm",
                env: &[("HIP_PATH", "/h"), ("ROCM_PATH", "/r")],
                want: expect(&[
                    &[
                        ("/r/lib/libamdhip64.so", "$ROCM_PATH/lib"),
                        ("/r/lib/libamdhip64.so.7", "$ROCM_PATH/lib"),
                        ("/r/lib/libamdhip64.so.6", "$ROCM_PATH/lib"),
                        ("/r/lib/libamdhip64.so.5", "$ROCM_PATH/lib"),
                        ("/h/lib/libamdhip64.so", "$HIP_PATH/lib"),
                        ("/h/lib/libamdhip64.so.7", "$HIP_PATH/lib"),
                        ("/h/lib/libamdhip64.so.6", "$HIP_PATH/lib"),
                        ("/h/lib/libamdhip64.so.5", "$HIP_PATH/lib"),
                    ],
                    &OPT,
                    &LOADER,
                ]),
            },
            Case {
                name: "only HIP_PATH",
                env: &[("HIP_PATH", "/usr")],
                want: expect(&[
                    &[
                        ("/usr/lib/libamdhip64.so", "$HIP_PATH/lib"),
                        ("/usr/lib/libamdhip64.so.7", "$HIP_PATH/lib"),
                        ("/usr/lib/libamdhip64.so.6", "$HIP_PATH/lib"),
                        ("/usr/lib/libamdhip64.so.5", "$HIP_PATH/lib"),
                    ],
                    &OPT,
                    &LOADER,
                ]),
            },
            Case {
                name: "duplicates keep the first origin",
                env: &[("ROCM_PATH", "/opt/rocm"), ("HIP_PATH", "/opt/rocm")],
                want: expect(&[
                    &[
                        ("/opt/rocm/lib/libamdhip64.so", "$ROCM_PATH/lib"),
                        ("/opt/rocm/lib/libamdhip64.so.7", "$ROCM_PATH/lib"),
                        ("/opt/rocm/lib/libamdhip64.so.6", "$ROCM_PATH/lib"),
                        ("/opt/rocm/lib/libamdhip64.so.5", "$ROCM_PATH/lib"),
                    ],
                    &LOADER,
                ]),
            },
            Case {
                name: "empty ROCM_PATH is skipped",
                env: &[("ROCM_PATH", ""), ("HIP_PATH", "/h")],
                want: expect(&[
                    &[
                        ("/h/lib/libamdhip64.so", "$HIP_PATH/lib"),
                        ("/h/lib/libamdhip64.so.7", "$HIP_PATH/lib"),
                        ("/h/lib/libamdhip64.so.6", "$HIP_PATH/lib"),
                        ("/h/lib/libamdhip64.so.5", "$HIP_PATH/lib"),
                    ],
                    &OPT,
                    &LOADER,
                ]),
            },
        ];
        for case in cases {
            assert_eq!(
                paths(&candidates(env_of(case.env))),
                case.want,
                "{}",
                case.name
            );
        }
    }

    #[test]
    fn ignores_unrelated_variables() {
        let env = env_of(&[("LD_LIBRARY_PATH", "/x"), ("DEVIPC_ASCEND_LIB", "/y")]);
        assert_eq!(paths(&candidates(env)), expect(&[&OPT, &LOADER]));
    }
}
