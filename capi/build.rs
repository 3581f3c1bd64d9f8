//! Gives `libdevipc.so` its soname: `libdevipc.so.<ABI major>` (`DEVIPC_ABI_VERSION_MAJOR`
//! in `src/version.rs`, checked against this by a unit test), so a program linked against
//! one ABI major version never loads another.

/// The ABI major version the soname carries; `src/version.rs` pins it to the header's.
const ABI_MAJOR: u32 = 0;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os == "linux" {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libdevipc.so.{ABI_MAJOR}");
    }
    println!("cargo:rustc-env=DEVIPC_CAPI_SONAME_MAJOR={ABI_MAJOR}");
}
