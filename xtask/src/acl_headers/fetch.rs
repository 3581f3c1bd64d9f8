//! Where the headers come from: pinned torch-npu wheels, downloaded with pip into a cache
//! outside the source tree, of which only the ACL header directories are kept.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::Error;

/// A pinned torch-npu wheel whose headers are checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wheel {
    /// The torch-npu version (`pip download torch-npu==<version>`).
    pub version: &'static str,
    /// The Python version the wheel is built for (`--python-version`).
    pub python: &'static str,
    /// The wheel's platform tag (`--platform`).
    pub platform: &'static str,
}

/// The newest torch-npu at the time of writing (ACL 1.17.0 headers, CANN 8.5/9.x).
pub const NEWEST: Wheel = Wheel {
    version: "2.14.0",
    python: "3.11",
    platform: "manylinux_2_28_x86_64",
};

/// A late-2024 torch-npu, whose vendored headers predate the IPC-key, notify-IPC and
/// shareable-handle APIs: the test that the required/optional split holds.
pub const OLD_2024: Wheel = Wheel {
    version: "2.1.0.post8",
    python: "3.9",
    platform: "manylinux2014_x86_64",
};

/// Every pinned wheel, newest first.
pub const WHEELS: &[Wheel] = &[NEWEST, OLD_2024];

/// The download cache: `$DEVIPC_ACL_HEADERS_CACHE` if set, else
/// `<target_dir>/acl-headers`.
pub fn cache_root(target_dir: &Path) -> PathBuf {
    if let Some(dir) = std::env::var_os("DEVIPC_ACL_HEADERS_CACHE").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    target_dir.join("acl-headers")
}

/// The directory `D` under `root` with `D/acl/acl_rt.h`, preferring the shallowest.
pub fn find_include_root(root: &Path) -> Option<PathBuf> {
    let mut stack = vec![root.to_path_buf()];
    let mut found: Vec<PathBuf> = Vec::new();
    while let Some(dir) = stack.pop() {
        if dir.join("acl").join("acl_rt.h").is_file() {
            found.push(dir.clone());
        }
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for e in entries.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    stack.push(e.path());
                }
            }
        }
    }
    found.sort_by_key(|p| p.components().count());
    found.into_iter().next()
}

/// The Python interpreter that runs pip.
fn python() -> Option<&'static str> {
    ["python3", "python"].into_iter().find(|p| {
        Command::new(p)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// Revision of the extraction rule; a cache written by another revision is refetched.
const EXTRACT_REV: u32 = 2;

/// Returns the include root of the wheel's ACL headers, downloading and extracting them
/// into `cache` (see [`cache_root`]) on first use. [`Error::Unavailable`] means "cannot
/// fetch here" (no Python, pip or network); [`Error::Failed`], that the wheel was fetched
/// but its headers could not be extracted or are not where they should be.
pub fn fetch_headers(wheel: &Wheel, cache: &Path) -> Result<PathBuf, Error> {
    let dest = cache.join(format!("torch-npu-{}", wheel.version));
    let marker = format!("torch-npu {} extract rev {EXTRACT_REV}", wheel.version);
    if std::fs::read_to_string(dest.join(".complete")).is_ok_and(|m| m == marker) {
        if let Some(root) = find_include_root(&dest) {
            return Ok(root);
        }
    }
    let unavailable = Error::Unavailable;
    let python =
        python().ok_or_else(|| unavailable("no python3/python on PATH to run pip".into()))?;
    let work = cache.join(format!(
        "torch-npu-{}.partial-{}",
        wheel.version,
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).map_err(|e| unavailable(format!("{}: {e}", work.display())))?;
    let wheel_dir = work.join("wheel");
    let out = Command::new(python)
        .args(["-m", "pip", "download", "--no-deps", "--only-binary=:all:"])
        .args([
            "--disable-pip-version-check",
            "--quiet",
            "--timeout",
            "60",
            "--retries",
            "2",
        ])
        .args([
            "--platform",
            wheel.platform,
            "--python-version",
            wheel.python,
        ])
        .arg(format!("torch-npu=={}", wheel.version))
        .arg("-d")
        .arg(&wheel_dir)
        .output()
        .map_err(|e| unavailable(format!("cannot run {python} -m pip: {e}")))?;
    if !out.status.success() {
        let _ = std::fs::remove_dir_all(&work);
        return Err(unavailable(format!(
            "pip download torch-npu=={} failed: {}",
            wheel.version,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let whl = std::fs::read_dir(&wheel_dir)
        .map_err(|e| unavailable(e.to_string()))?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .ok_or_else(|| unavailable("pip reported success but left no .whl".into()))?;
    // Extract only the ACL header directories (and `ge/`, which old `acl_base.h` includes
    // for the GE error codes).
    const EXTRACT: &str = r#"
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
names = [n for n in z.namelist()
         if n.endswith(".h") and any(d in n for d in ("/include/acl/", "/inc/acl/", "/inc/ge/"))]
z.extractall(sys.argv[2], names)
print(len(names))
"#;
    let include_dir = work.join("headers");
    let out = Command::new(python)
        .args(["-c", EXTRACT])
        .arg(&whl)
        .arg(&include_dir)
        .output()
        .map_err(|e| unavailable(format!("cannot run {python}: {e}")))?;
    if !out.status.success() {
        return Err(Error::Failed(format!(
            "extracting headers from {} failed: {}",
            whl.display(),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    std::fs::remove_dir_all(&wheel_dir).map_err(|e| unavailable(e.to_string()))?;
    std::fs::write(work.join(".complete"), &marker).map_err(|e| unavailable(e.to_string()))?;
    let _ = std::fs::remove_dir_all(&dest);
    if std::fs::rename(&work, &dest).is_err() {
        // Another process finished the same download first: use its copy.
        let _ = std::fs::remove_dir_all(&work);
    }
    // The wheel was fetched: headers missing from it is a finding, not a skip.
    find_include_root(&dest).ok_or_else(|| {
        Error::Failed(format!(
            "torch-npu {} has no acl/acl_rt.h (layout changed?); looked in {}",
            wheel.version,
            dest.display()
        ))
    })
}
