//! The command line of `cargo xtask`.
//!
//! ```text
//! cargo xtask acl-headers fetch [--wheel VERSION]...
//!     download the pinned torch-npu wheels (default: all) into the header cache and
//!     print the include root of each one's ACL headers
//! cargo xtask acl-headers check [--wheel VERSION]... [--include DIR]...
//!     check devipc-ascend-sys against those headers (default: every pinned wheel), or
//!     against a local CANN `include` directory holding acl/acl_rt.h
//! cargo xtask acl-headers list
//!     print the C prototype of every function of for_each_acl_fn!, required or optional
//! cargo xtask header [--check]
//!     write include/devipc.h from capi/ (cbindgen), or check that it is up to date
//! cargo xtask help
//! ```
//!
//! The cache is `$DEVIPC_ACL_HEADERS_CACHE`, else `<target dir>/acl-headers`, the one
//! `cargo test` uses; the generated C++ goes to `<target dir>/tmp/devipc-xtask/`. Exit
//! code: 0 when everything ran and passed, 1 when a check failed, 2 on a usage error, 3
//! when something could not run here (no Python/pip, network or C++ compiler).

use std::path::{Path, PathBuf};

use devipc_ascend_sys::abi;

use crate::acl_headers::{self, Decls, Error, Headers, WHEELS, Wheel};

/// What to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Print the usage.
    Help,
    /// `acl-headers fetch`: download the wheels' headers into the cache.
    Fetch {
        /// The wheels to fetch.
        wheels: Vec<Wheel>,
    },
    /// `acl-headers check`: check the crate against the wheels' headers and local
    /// include directories.
    Check {
        /// The pinned wheels to check against.
        wheels: Vec<Wheel>,
        /// Local include directories (each holding `acl/acl_rt.h` somewhere below).
        includes: Vec<PathBuf>,
    },
    /// `acl-headers list`: print the crate's functions as C prototypes.
    List,
    /// `header [--check]`: write (or check) the C ABI's header.
    Header {
        /// Check instead of writing.
        check: bool,
    },
}

/// The usage text.
pub const USAGE: &str = "usage: cargo xtask acl-headers fetch [--wheel VERSION]...
       cargo xtask acl-headers check [--wheel VERSION]... [--include DIR]...
       cargo xtask acl-headers list
       cargo xtask header [--check]
       cargo xtask help";

/// Exit code: everything ran and passed.
pub const EXIT_OK: i32 = 0;
/// Exit code: a check failed.
pub const EXIT_FAILED: i32 = 1;
/// Exit code: the command line is wrong.
pub const EXIT_USAGE: i32 = 2;
/// Exit code: something could not run here (no Python/pip, network or C++ compiler).
pub const EXIT_UNAVAILABLE: i32 = 3;

/// The pinned wheel of torch-npu `version`.
fn wheel(version: &str) -> Result<Wheel, String> {
    WHEELS
        .iter()
        .find(|w| w.version == version)
        .copied()
        .ok_or_else(|| {
            let known: Vec<&str> = WHEELS.iter().map(|w| w.version).collect();
            format!(
                "--wheel {version}: not a pinned torch-npu wheel (pinned: {})",
                known.join(", ")
            )
        })
}

/// Parses the arguments after the program name.
pub fn parse(args: &[String]) -> Result<Command, String> {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (sub, rest) = match args.as_slice() {
        [] | ["help" | "--help" | "-h", ..] => return Ok(Command::Help),
        ["header"] => return Ok(Command::Header { check: false }),
        ["header", "--check"] => return Ok(Command::Header { check: true }),
        ["header", ..] => return Err(format!("header takes only --check\n{USAGE}")),
        ["acl-headers", sub, rest @ ..] => (*sub, rest),
        ["acl-headers"] => return Err(format!("acl-headers needs a subcommand\n{USAGE}")),
        [other, ..] => return Err(format!("unknown command `{other}`\n{USAGE}")),
    };
    if !["fetch", "check", "list"].contains(&sub) {
        return Err(format!("unknown subcommand `acl-headers {sub}`\n{USAGE}"));
    }
    let mut wheels = Vec::new();
    let mut includes = Vec::new();
    let mut it = rest.iter();
    while let Some(&arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v)),
            _ => (arg, None),
        };
        let mut value = |name: &str| -> Result<&str, String> {
            inline
                .or_else(|| it.next().copied())
                .ok_or_else(|| format!("{name} needs a value\n{USAGE}"))
        };
        match (sub, flag) {
            ("fetch" | "check", "--wheel") => {
                let w = wheel(value("--wheel")?)?;
                if !wheels.contains(&w) {
                    wheels.push(w);
                }
            }
            ("check", "--include") => includes.push(PathBuf::from(value("--include")?)),
            (_, "--help" | "-h") => return Ok(Command::Help),
            _ => {
                return Err(format!(
                    "acl-headers {sub}: unknown argument `{arg}`\n{USAGE}"
                ));
            }
        }
    }
    match sub {
        "fetch" => {
            if wheels.is_empty() {
                wheels = WHEELS.to_vec();
            }
            Ok(Command::Fetch { wheels })
        }
        "check" => {
            if wheels.is_empty() && includes.is_empty() {
                wheels = WHEELS.to_vec();
            }
            Ok(Command::Check { wheels, includes })
        }
        _ => Ok(Command::List),
    }
}

/// The target directory this binary was built into (`<target>/<profile>/xtask`), where
/// the header cache and the scratch files go.
fn target_dir() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.to_path_buf()))
        .unwrap_or_else(|| PathBuf::from("target"))
}

/// The exit code for a tool error, after printing it.
fn report_error(what: &str, e: &Error) -> i32 {
    match e {
        Error::Unavailable(reason) => {
            eprintln!("cannot run here: {what}: {reason}");
            EXIT_UNAVAILABLE
        }
        Error::Failed(reason) => {
            eprintln!("FAILED: {what}: {reason}");
            EXIT_FAILED
        }
    }
}

/// The worse of two exit codes: a failure over "could not run" over success.
fn worse(a: i32, b: i32) -> i32 {
    let rank = |c: i32| match c {
        EXIT_OK => 0,
        EXIT_UNAVAILABLE => 1,
        _ => 2,
    };
    if rank(b) > rank(a) { b } else { a }
}

/// Checks the crate against the headers under `root`, printing the report and the
/// failures; returns the exit code.
fn check_one(what: &str, root: &Path, cxx: &str, scratch: &Path) -> i32 {
    match acl_headers::check(&Decls::of_crate(), &Headers::acl(root), cxx, scratch) {
        Ok(report) => {
            print!("{}", report.summary(what));
            let failures = report.crate_failures(what);
            for f in &failures {
                eprintln!("FAILED: {f}");
            }
            if failures.is_empty() {
                println!("ok: {what}");
                EXIT_OK
            } else {
                EXIT_FAILED
            }
        }
        Err(e) => report_error(what, &e),
    }
}

/// Runs `command`; returns the exit code.
pub fn run(command: &Command) -> i32 {
    let target = target_dir();
    let cache = acl_headers::cache_root(&target);
    let scratch = target.join("tmp").join("devipc-xtask");
    match command {
        Command::Help => {
            println!("{USAGE}");
            EXIT_OK
        }
        Command::Header { check } => match crate::header::run(*check) {
            Ok(done) => {
                println!("{done}");
                EXIT_OK
            }
            Err(why) => {
                eprintln!("FAILED: {why}");
                EXIT_FAILED
            }
        },
        Command::List => {
            for f in abi::FUNCTIONS {
                match f.c_prototype() {
                    Ok(p) => println!(
                        "{p}; // {}",
                        if f.required { "required" } else { "optional" }
                    ),
                    Err(e) => {
                        eprintln!("FAILED: {}: {e}", f.name);
                        return EXIT_FAILED;
                    }
                }
            }
            EXIT_OK
        }
        Command::Fetch { wheels } => {
            let mut code = EXIT_OK;
            for w in wheels {
                match acl_headers::fetch_headers(w, &cache) {
                    Ok(root) => println!("torch-npu {}: {}", w.version, root.display()),
                    Err(e) => {
                        code = worse(code, report_error(&format!("torch-npu {}", w.version), &e))
                    }
                }
            }
            code
        }
        Command::Check { wheels, includes } => {
            let Some(cxx) = acl_headers::find_cxx() else {
                eprintln!(
                    "cannot run here: no C++ compiler (g++, c++, clang++ or $CXX) for the ABI check"
                );
                return EXIT_UNAVAILABLE;
            };
            let mut code = EXIT_OK;
            for w in wheels {
                let name = format!("torch-npu {}", w.version);
                let one = match acl_headers::fetch_headers(w, &cache) {
                    Ok(root) => {
                        let what = format!("{name} headers ({})", root.display());
                        let dir = scratch.join(format!("torch-npu-{}", w.version));
                        check_one(&what, &root, &cxx, &dir)
                    }
                    Err(e) => report_error(&name, &e),
                };
                code = worse(code, one);
            }
            for (i, dir) in includes.iter().enumerate() {
                let one = match acl_headers::find_include_root(dir) {
                    Some(root) => {
                        let what = format!("local headers {}", root.display());
                        check_one(&what, &root, &cxx, &scratch.join(format!("local-{i}")))
                    }
                    None => {
                        eprintln!("FAILED: no acl/acl_rt.h under {}", dir.display());
                        EXIT_FAILED
                    }
                };
                code = worse(code, one);
            }
            code
        }
    }
}

/// The program: parses the arguments and runs them; returns the exit code.
pub fn main() -> i32 {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match parse(&args) {
        Ok(command) => run(&command),
        Err(e) => {
            eprintln!("{e}");
            EXIT_USAGE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acl_headers::{NEWEST, OLD_2024};

    fn parse_str(line: &str) -> Result<Command, String> {
        let args: Vec<String> = line.split_whitespace().map(str::to_owned).collect();
        parse(&args)
    }

    #[test]
    fn the_subcommands_parse_with_their_defaults() {
        assert_eq!(parse_str(""), Ok(Command::Help));
        assert_eq!(parse_str("help"), Ok(Command::Help));
        assert_eq!(parse_str("acl-headers list"), Ok(Command::List));
        assert_eq!(parse_str("header"), Ok(Command::Header { check: false }));
        assert_eq!(
            parse_str("header --check"),
            Ok(Command::Header { check: true })
        );
        assert!(parse_str("header --frob").is_err());
        assert_eq!(
            parse_str("acl-headers fetch"),
            Ok(Command::Fetch {
                wheels: WHEELS.to_vec()
            })
        );
        assert_eq!(
            parse_str("acl-headers check"),
            Ok(Command::Check {
                wheels: WHEELS.to_vec(),
                includes: vec![]
            })
        );
    }

    #[test]
    fn wheels_and_include_dirs_are_chosen_by_flag() {
        assert_eq!(
            parse_str("acl-headers fetch --wheel 2.1.0.post8 --wheel=2.1.0.post8"),
            Ok(Command::Fetch {
                wheels: vec![OLD_2024]
            })
        );
        assert_eq!(
            parse_str("acl-headers check --include /opt/cann/include"),
            Ok(Command::Check {
                wheels: vec![],
                includes: vec![PathBuf::from("/opt/cann/include")]
            })
        );
        assert_eq!(
            parse_str("acl-headers check --wheel 2.14.0 --include=inc"),
            Ok(Command::Check {
                wheels: vec![NEWEST],
                includes: vec![PathBuf::from("inc")]
            })
        );
    }

    #[test]
    fn usage_errors_name_the_problem() {
        let err = |line| parse_str(line).unwrap_err();
        assert!(err("frobnicate").contains("unknown command `frobnicate`"));
        assert!(err("acl-headers").contains("needs a subcommand"));
        assert!(err("acl-headers frob").contains("unknown subcommand"));
        assert!(err("acl-headers fetch --wheel").contains("--wheel needs a value"));
        assert!(err("acl-headers fetch --wheel 9.9").contains("not a pinned torch-npu wheel"));
        assert!(err("acl-headers fetch --include x").contains("unknown argument `--include`"));
        assert!(err("acl-headers list --wheel 2.14.0").contains("unknown argument"));
    }

    #[test]
    fn a_failure_outranks_an_unavailable_tool_which_outranks_success() {
        assert_eq!(worse(EXIT_OK, EXIT_UNAVAILABLE), EXIT_UNAVAILABLE);
        assert_eq!(worse(EXIT_UNAVAILABLE, EXIT_FAILED), EXIT_FAILED);
        assert_eq!(worse(EXIT_FAILED, EXIT_UNAVAILABLE), EXIT_FAILED);
        assert_eq!(worse(EXIT_OK, EXIT_OK), EXIT_OK);
    }
}
