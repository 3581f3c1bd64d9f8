//! The cdylib resolves every symbol of both vendor surfaces through the backends'
//! `libloading` path, exports exactly the vendor names, and the in-process emulator puts
//! none of them into a process's dynamic symbol table.

// The shell's device masks (HIP_VISIBLE_DEVICES=3 for a real GPU) never renumber the
// emulated devices these tests use.
devipc_testkit::hermetic_device_masks!();

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

use devipc_ascend_sys::AclApi;
use devipc_hip_sys::HipApi;

/// `target/<profile>/libdevipc_emulator.so`, next to this test's `deps/` directory.
///
/// `cargo test` does not build a cdylib-only library for its integration tests, so the
/// first test that needs it runs `cargo build` for this package into the same target
/// directory (a no-op when it is up to date).
fn cdylib_path() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let exe = std::env::current_exe().unwrap();
            let profile_dir = exe.parent().and_then(|deps| deps.parent()).unwrap();
            let target_dir = profile_dir.parent().unwrap();
            let mut cmd = Command::new(env!("CARGO"));
            cmd.args(["build", "-p", env!("CARGO_PKG_NAME"), "--target-dir"])
                .arg(target_dir);
            if profile_dir.file_name().is_some_and(|p| p == "release") {
                cmd.arg("--release");
            }
            let status = cmd.status().expect("run cargo build for the cdylib");
            assert!(status.success(), "building the cdylib failed");
            let path = profile_dir.join("libdevipc_emulator.so");
            assert!(
                path.exists(),
                "{} is missing after the build",
                path.display()
            );
            path
        })
        .clone()
}

/// The dynamic symbols a file defines, from `nm -D --defined-only`; `None` (after a loud
/// skip of `test`) when binutils' `nm` is not installed.
fn defined_dynamic_symbols(test: &str, file: &std::path::Path) -> Option<BTreeSet<String>> {
    let out = match Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(file)
        .output()
    {
        Ok(out) => out,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            devipc_testkit::skip(test, "needs nm (apt-get install binutils)");
            return None;
        }
        Err(e) => panic!("nm: {e}"),
    };
    assert!(
        out.status.success(),
        "nm failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_whitespace().last().map(str::to_owned))
            .collect(),
    )
}

fn vendor_names() -> BTreeSet<String> {
    AclApi::REQUIRED_SYMBOLS
        .iter()
        .chain(AclApi::OPTIONAL_SYMBOLS)
        .chain(HipApi::REQUIRED_SYMBOLS)
        .chain(HipApi::OPTIONAL_SYMBOLS)
        .map(|s| (*s).to_owned())
        .collect()
}

#[test]
fn the_cdylib_resolves_every_symbol_of_both_surfaces() {
    let path = cdylib_path();
    // SAFETY: the library is the devipc emulator, which implements both C APIs.
    let acl = unsafe { AclApi::load(&path) }.expect("every required ACL symbol resolves");
    assert!(
        acl.missing_optional().is_empty(),
        "optional ACL symbols missing: {:?}",
        acl.missing_optional()
    );
    // SAFETY: as above.
    let hip = unsafe { HipApi::load(&path) }.expect("every required HIP symbol resolves");
    assert_eq!(
        hip.source(),
        &devipc_core::LibrarySource::Loaded(path.clone())
    );

    // And the functions work through the loaded table.
    let mut version = 0;
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { (hip.hipRuntimeGetVersion)(&mut version) }, 0);
    assert!(version >= 50_000_000, "{version}");
    let mut count = 0u32;
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { (acl.aclrtGetDeviceCount)(&mut count) }, 0);
    assert!(count >= 1);
}

#[test]
fn the_cdylib_exports_exactly_the_vendor_names() {
    let test = "the_cdylib_exports_exactly_the_vendor_names";
    let Some(symbols) = defined_dynamic_symbols(test, &cdylib_path()) else {
        return;
    };
    let exported: BTreeSet<String> = symbols
        .into_iter()
        .filter(|s| s.starts_with("acl") || s.starts_with("hip"))
        .collect();
    assert_eq!(exported, vendor_names());
}

#[test]
fn the_in_process_emulator_adds_no_vendor_symbol_to_the_dynamic_table() {
    // Link the emulator's in-process form into this test binary for real.
    let api = emu::hip::hip_api();
    assert!(api.source().is_emulated());
    let exe = std::env::current_exe().unwrap();
    let test = "the_in_process_emulator_adds_no_vendor_symbol_to_the_dynamic_table";
    let Some(symbols) = defined_dynamic_symbols(test, &exe) else {
        return;
    };
    let leaked: Vec<String> = symbols.intersection(&vendor_names()).cloned().collect();
    assert!(
        leaked.is_empty(),
        "vendor names in the test binary's dynamic symbols: {leaked:?}"
    );
}
