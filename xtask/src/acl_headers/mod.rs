//! Checks every declaration of `devipc-ascend-sys` against the real ACL headers.
//!
//! The headers ship inside the `torch-npu` wheel on PyPI (`torch_npu/include/acl/` in
//! current wheels, `torch_npu/include/third_party/acl/inc/acl/` in older ones).
//! [`fetch_headers`] downloads a pinned wheel with `pip download --no-deps`, extracts only
//! the `acl` header directories into a cache (`<target dir>/acl-headers/` by default,
//! reused on later runs; nothing vendor is ever written into the source tree), and
//! [`check`] then compiles one C++ translation unit, generated from
//! [`devipc_ascend_sys::abi`], that includes the headers and asserts:
//!
//! - every function of `for_each_acl_fn!`: its address has exactly the type of the C
//!   prototype spelled from the Rust declaration;
//! - every type: a plain typedef is the same type, an enum has the same size and
//!   alignment, a struct the same size, alignment, field offsets, field sizes and field
//!   types;
//! - every constant: the value; for `#define`s and `static const int`s also the size and
//!   signedness of the C type; for enumerators, that they belong to the enum named.
//!
//! C++ rather than C, because the ACL-layer error codes are `static const int`, which C
//! does not accept in a constant expression, and because C would let an enum parameter
//! pass for `unsigned int`. Every failed assertion is reported (the compiler keeps
//! going), each with what Rust declares and, for functions, what the header declares.
//! A function or constant the fetched header does not declare (an older header) is
//! reported as absent, not as a mismatch; [`Report::crate_failures`] says what the crate
//! requires (no mismatch, the header's parameter names, every required function).
//!
//! Without Python/pip, network or a C++ compiler the tool cannot run:
//! [`Error::Unavailable`], which the tests turn into a loud skip. `DEVIPC_ACL_HEADERS_CACHE`
//! moves the download cache (e.g. for CI caching).

mod fetch;
mod generate;
mod preprocess;
mod report;

use std::path::{Path, PathBuf};
use std::process::Command;

pub use fetch::{NEWEST, OLD_2024, WHEELS, Wheel, cache_root, fetch_headers, find_include_root};
pub use generate::Decls;
pub use report::Report;

/// Why the tool stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The check cannot run here: no Python or pip, no network, no C++ compiler. A test
    /// reports it as a skip.
    #[error("{0}")]
    Unavailable(String),
    /// The check ran and found something wrong outside the report itself (the headers do
    /// not preprocess, a wheel has no ACL headers, the generated code does not compile
    /// for a reason other than a mismatch, a declaration has no C spelling): a failure.
    #[error("{0}")]
    Failed(String),
}

/// Which headers to include, from where.
#[derive(Debug, Clone)]
pub struct Headers {
    /// The `-I` directories.
    pub include_dirs: Vec<PathBuf>,
    /// The `#include "..."` lines, in order.
    pub includes: Vec<&'static str>,
}

impl Headers {
    /// The ACL headers under an include root (the directory holding `acl/acl_rt.h`).
    pub fn acl(root: &Path) -> Self {
        Headers {
            include_dirs: vec![root.to_path_buf(), root.join("acl")],
            includes: vec!["acl/acl.h", "acl/acl_rt.h"],
        }
    }
}

/// The C++ compiler to use: `$CXX`, else the first of `g++`, `c++`, `clang++` that runs.
pub fn find_cxx() -> Option<String> {
    let candidates = std::env::var("CXX").ok().into_iter().chain([
        "g++".to_owned(),
        "c++".to_owned(),
        "clang++".to_owned(),
    ]);
    candidates.into_iter().find(|c| {
        Command::new(c)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// The compiler with the language, warning and include flags every run uses.
fn compiler_args(cxx: &str, headers: &Headers) -> Command {
    let mut cmd = Command::new(cxx);
    cmd.args(["-std=c++11", "-x", "c++", "-w"]);
    for dir in &headers.include_dirs {
        cmd.arg("-I").arg(dir);
    }
    cmd
}

/// Runs the whole check of `decls` against `headers` with the compiler `cxx`, writing the
/// generated sources into `scratch`.
pub fn check(decls: &Decls, headers: &Headers, cxx: &str, scratch: &Path) -> Result<Report, Error> {
    let failed = |what: &str, e: std::io::Error| Error::Failed(format!("{what}: {e}"));
    std::fs::create_dir_all(scratch).map_err(|e| failed(&scratch.display().to_string(), e))?;
    let pre = preprocess::preprocess(cxx, headers, scratch)?;
    let mut report = Report::default();
    let tu = generate::generate(decls, headers, &pre, &mut report)?;
    let src = scratch.join("abi_check.cpp");
    std::fs::write(&src, &tu).map_err(|e| failed(&src.display().to_string(), e))?;
    let out = compiler_args(cxx, headers)
        .args(["-fsyntax-only", "-fmax-errors=0"])
        .arg(&src)
        .output()
        .map_err(|e| failed(&format!("cannot run {cxx}"), e))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    let mut other_errors = Vec::new();
    for line in stderr.lines().filter(|l| l.contains("error")) {
        match line.split_once("DEVIPC-MISMATCH ") {
            Some((_, msg)) => report.mismatches.push(msg.trim_end_matches('"').to_owned()),
            None => other_errors.push(line.to_owned()),
        }
    }
    if !other_errors.is_empty() {
        return Err(Error::Failed(format!(
            "the generated check ({}) does not compile for reasons other than a mismatch:\n{}",
            src.display(),
            other_errors.join("\n")
        )));
    }
    if out.status.success() != report.mismatches.is_empty() {
        return Err(Error::Failed(format!(
            "compiler status and mismatch list disagree:\n{stderr}"
        )));
    }
    Ok(report)
}

/// The check of the crate's own declarations ([`Decls::of_crate`]) against the ACL
/// headers under `root`, with its report printed as `what` ([`Report::print`]).
pub fn check_crate(what: &str, root: &Path, cxx: &str, scratch: &Path) -> Result<Report, Error> {
    let report = check(&Decls::of_crate(), &Headers::acl(root), cxx, scratch)?;
    report.print(what);
    Ok(report)
}
