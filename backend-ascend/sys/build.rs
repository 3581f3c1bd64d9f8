//! Feature `link` only: where to find `libascendcl.so` at link time.
//!
//! `$DEVIPC_ASCEND_LINK_DIR` if set, else `$ASCEND_HOME_PATH/lib64` (set by CANN's
//! `set_env.sh`), else the first of the CANN default library directories that exists.
//! Without any, nothing is added and the linker's default path must have it. Without the
//! feature this script does nothing.

use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=DEVIPC_ASCEND_LINK_DIR");
    println!("cargo:rerun-if-env-changed=ASCEND_HOME_PATH");
    if std::env::var_os("CARGO_FEATURE_LINK").is_none() {
        return;
    }
    let non_empty = |key: &str| std::env::var_os(key).filter(|v| !v.is_empty());
    let dir = non_empty("DEVIPC_ASCEND_LINK_DIR")
        .map(PathBuf::from)
        .or_else(|| non_empty("ASCEND_HOME_PATH").map(|root| Path::new(&root).join("lib64")))
        .or_else(|| {
            [
                "/usr/local/Ascend/cann/lib64",
                "/usr/local/Ascend/ascend-toolkit/latest/lib64",
            ]
            .into_iter()
            .map(PathBuf::from)
            .find(|d| d.is_dir())
        });
    if let Some(dir) = dir {
        println!("cargo:rustc-link-search=native={}", dir.display());
    }
}
