//! Where to look for `libamdhip64`: the HIP [`SearchOrder`] (DESIGN section 8).
//!
//! Data only: the walk is `devipc_sys_common`'s, the same for both vendors, a pure
//! function of an injected environment lookup so the order is table-tested without
//! touching the process environment. [`HipApi::discover`](crate::HipApi::discover) feeds
//! [`candidates`] the real environment and tries each candidate with the dynamic loader,
//! recording a [`LoadAttempt`](devipc_core::LoadAttempt) per failure.
//!
//! Order:
//! 1. `DEVIPC_HIP_LIB`: one exact library. When set (non-empty) it is the **only**
//!    candidate: an explicit choice must not silently fall back to another runtime (e.g.
//!    the emulator library under test to the real one). A value with a `/` is a file path
//!    (a relative one from the current directory); one without is a library name that the
//!    dynamic loader searches for (`DEVIPC_HIP_LIB=libamdhip64.so.6`). A path that is not a
//!    regular file (a FIFO, a directory, ...) is refused before loading, and a file that
//!    exists but does not load is reported as such, both as `Error::Config`
//!    ([`devipc_sys_common::open_first`]).
//! 2. `$ROCM_PATH/lib`, `$HIP_PATH/lib`, `/opt/rocm/lib` (origin `default ROCm install`):
//!    in each directory the names [`LIBRARY_NAMES`] in order.
//! 3. The same names bare, resolved by the dynamic loader's own search (`LD_LIBRARY_PATH`,
//!    `ld.so.cache`, e.g. Debian's `/usr/lib/x86_64-linux-gnu/libamdhip64.so.5`), origin
//!    [`LOADER_PATH_ORIGIN`].
//!
//! Unset or empty variables are skipped; a path that appears twice is tried once, under
//! the origin that listed it first.

use std::ffi::OsString;

use devipc_core::BackendKind;
pub use devipc_sys_common::{Candidate, LOADER_PATH_ORIGIN, SearchOrder};

/// The environment variable naming the HIP library exactly, as a file path or a bare name
/// for the loader's search (the only candidate when set).
pub const LIBRARY_ENV_VAR: &str = BackendKind::Hip.library_env_var();

/// Environment variables naming a ROCm / HIP install root whose `lib` directory is
/// searched, in order.
pub const INSTALL_ROOT_ENV_VARS: [&str; 2] = ["ROCM_PATH", "HIP_PATH"];

/// The default library directory of the ROCm installers, with its origin.
pub const DEFAULT_LIBRARY_DIRS: [(&str, &str); 1] = [("/opt/rocm/lib", "default ROCm install")];

/// File names of the HIP runtime, tried in this order in every directory and on the
/// loader path: the development symlink, then the ROCm 7, 6 and 5 sonames
/// (api-facts B.1).
pub const LIBRARY_NAMES: [&str; 4] = [
    "libamdhip64.so",
    "libamdhip64.so.7",
    "libamdhip64.so.6",
    "libamdhip64.so.5",
];

/// The HIP search order, as data.
pub const SEARCH_ORDER: SearchOrder = SearchOrder {
    backend: BackendKind::Hip,
    root_env_vars: &INSTALL_ROOT_ENV_VARS,
    root_lib_dir: "lib",
    default_dirs: &DEFAULT_LIBRARY_DIRS,
    library_names: &LIBRARY_NAMES,
};

/// The ordered candidate list for an environment, given as a lookup function (pass
/// `|k| std::env::var_os(k)` for the process environment).
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

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<OsString> {
        move |key| {
            pairs
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| OsString::from(v))
        }
    }

    fn paths(c: &[Candidate]) -> Vec<(String, &str)> {
        c.iter()
            .map(|c| (c.path.display().to_string(), c.origin.as_str()))
            .collect()
    }

    const LOADER: [(&str, &str); 4] = [
        ("libamdhip64.so", LOADER_PATH_ORIGIN),
        ("libamdhip64.so.7", LOADER_PATH_ORIGIN),
        ("libamdhip64.so.6", LOADER_PATH_ORIGIN),
        ("libamdhip64.so.5", LOADER_PATH_ORIGIN),
    ];
    const OPT: [(&str, &str); 4] = [
        ("/opt/rocm/lib/libamdhip64.so", "default ROCm install"),
        ("/opt/rocm/lib/libamdhip64.so.7", "default ROCm install"),
        ("/opt/rocm/lib/libamdhip64.so.6", "default ROCm install"),
        ("/opt/rocm/lib/libamdhip64.so.5", "default ROCm install"),
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

    /// `DEVIPC_HIP_LIB` naming what is not a HIP library, through the real loader: a
    /// FIFO (which would block `dlopen` forever), a directory, and files that exist but
    /// do not load, are configuration errors that say so; a bare name goes to the
    /// loader's search. Each discovery runs on a thread with a deadline, so a regression
    /// fails instead of hanging.
    #[test]
    fn a_bad_override_is_a_config_error_through_the_loader() {
        use devipc_core::Error;
        use std::path::PathBuf;
        use std::sync::mpsc;
        use std::time::Duration;

        let dir =
            std::env::temp_dir().join(format!("devipc-hip-sys-override-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("fifo.so");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.is_ok_and(|s| s.success()), "mkfifo {}", fifo.display());
        let subdir = dir.join("dir.so");
        std::fs::create_dir(&subdir).unwrap();
        let text = dir.join("text.so");
        std::fs::write(&text, "not a library\n").unwrap();
        let empty = dir.join("empty.so");
        std::fs::write(&empty, "").unwrap();
        let truncated = dir.join("trunc.so");
        let exe = std::fs::read("/proc/self/exe").unwrap();
        std::fs::write(&truncated, &exe[..64]).unwrap();

        let discover = |value: PathBuf| {
            let (tx, rx) = mpsc::channel();
            let v = value.clone();
            std::thread::spawn(move || {
                let got = crate::HipApi::discover_with_env(|k| {
                    (k == LIBRARY_ENV_VAR).then(|| v.clone().into_os_string())
                });
                let _ = tx.send(got.map(|_| ()));
            });
            match rx.recv_timeout(Duration::from_secs(30)) {
                Ok(got) => got,
                Err(_) => {
                    // Unblock a dlopen stuck on the FIFO (it reads EOF), then fail.
                    let _ = std::fs::OpenOptions::new().write(true).open(&value);
                    panic!("discovery with {LIBRARY_ENV_VAR}={} hung", value.display())
                }
            }
        };
        for (path, problem) in [
            (&fifo, "is a FIFO (named pipe), not a library file"),
            (&subdir, "is a directory, not a library file"),
            (
                &text,
                "the file exists but the dynamic loader cannot load it",
            ),
            (
                &empty,
                "the file exists but the dynamic loader cannot load it",
            ),
            (
                &truncated,
                "the file exists but the dynamic loader cannot load it",
            ),
        ] {
            let err = discover(path.clone()).unwrap_err();
            let text = err.to_string();
            assert!(
                matches!(err, Error::Config { .. }),
                "{}: {err:?}",
                path.display()
            );
            assert!(text.contains(problem), "{text}");
            assert!(
                text.contains(&format!("{LIBRARY_ENV_VAR}={}", path.display())),
                "{text}"
            );
        }
        // A missing file is not found (with the loader's message).
        let missing = dir.join("missing.so");
        assert!(matches!(
            discover(missing),
            Err(Error::LibraryNotFound { tried, .. }) if tried.len() == 1
        ));
        // A bare name is the loader's to find: libm loads, and lacks hipInit.
        assert!(
            matches!(
                discover(PathBuf::from("libm.so.6")),
                Err(Error::MissingSymbol {
                    symbol: "hipInit",
                    ..
                })
            ),
            "a bare override name goes to the loader's search"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
