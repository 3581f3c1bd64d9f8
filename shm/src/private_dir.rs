//! Private directories for shared state: created with mode 0700, refused unless safe.
//!
//! Files that several processes of one user map or lock live in a directory under
//! `/dev/shm` (the emulator's state, the HIP backend's signal words). Because other users
//! can create entries in `/dev/shm`, a directory is refused unless it is a real directory
//! (not a symlink), owned by the effective uid, and not accessible to group or others. A
//! missing directory is created with mode 0700 (parents with default permissions). Since
//! nobody else can enter a 0700 directory, paths below it cannot be swapped by another
//! user, and the directory itself sits in a sticky `/dev/shm` where others cannot rename
//! it.
//!
//! The rule is the pure function [`check_dir_facts`], so the "owned by another uid"
//! refusal is testable without `chown`.

use std::fmt;
use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The facts about a path that decide whether it is a usable state directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DirFacts {
    /// `lstat` says symlink.
    pub is_symlink: bool,
    /// `lstat` says directory.
    pub is_dir: bool,
    /// Owner uid.
    pub uid: u32,
    /// Permission bits (`st_mode & 0o7777`).
    pub mode: u32,
}

impl DirFacts {
    /// The facts of `path` from `lstat` (symlinks are not followed).
    pub fn of(path: &Path) -> io::Result<DirFacts> {
        let m = fs::symlink_metadata(path)?;
        Ok(DirFacts::from_metadata(&m))
    }

    /// The facts from already fetched (`lstat`) metadata.
    pub fn from_metadata(m: &fs::Metadata) -> DirFacts {
        DirFacts {
            is_symlink: m.file_type().is_symlink(),
            is_dir: m.file_type().is_dir(),
            uid: m.uid(),
            mode: m.mode() & 0o7777,
        }
    }
}

/// Why a state directory is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DirProblem {
    /// The path is a symbolic link.
    Symlink,
    /// The path exists but is not a directory.
    NotDirectory,
    /// The directory belongs to another user.
    WrongOwner {
        /// Its owner.
        owner: u32,
        /// Our effective uid.
        expected: u32,
    },
    /// Group or others have some access.
    TooPermissive {
        /// Its permission bits.
        mode: u32,
    },
}

impl fmt::Display for DirProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DirProblem::Symlink => f.write_str("it is a symbolic link; use the real path"),
            DirProblem::NotDirectory => f.write_str("it exists and is not a directory"),
            DirProblem::WrongOwner { owner, expected } => write!(
                f,
                "it is owned by uid {owner}, not by this user (uid {expected}); use a directory of your own"
            ),
            DirProblem::TooPermissive { mode } => write!(
                f,
                "its mode {mode:04o} gives group/others access; run chmod 700 on it"
            ),
        }
    }
}

impl std::error::Error for DirProblem {}

/// The validation rule: a real directory, owned by `expected_uid`, with no group/other
/// permission bits.
pub fn check_dir_facts(facts: &DirFacts, expected_uid: u32) -> Result<(), DirProblem> {
    if facts.is_symlink {
        return Err(DirProblem::Symlink);
    }
    if !facts.is_dir {
        return Err(DirProblem::NotDirectory);
    }
    if facts.uid != expected_uid {
        return Err(DirProblem::WrongOwner {
            owner: facts.uid,
            expected: expected_uid,
        });
    }
    if facts.mode & 0o077 != 0 {
        return Err(DirProblem::TooPermissive { mode: facts.mode });
    }
    Ok(())
}

/// Why [`open_private_dir`] failed.
#[derive(Debug)]
pub enum PrivateDirError {
    /// A file-system operation failed.
    Io {
        /// What was done, e.g. `mkdir`.
        op: &'static str,
        /// On which path.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// The path exists but is unsafe to use.
    Refused {
        /// The refused path.
        path: PathBuf,
        /// Why.
        problem: DirProblem,
    },
}

impl PrivateDirError {
    fn io(op: &'static str, path: &Path, source: io::Error) -> Self {
        PrivateDirError::Io {
            op,
            path: path.to_owned(),
            source,
        }
    }
}

impl fmt::Display for PrivateDirError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PrivateDirError::Io { op, path, source } => {
                write!(f, "{op} {}: {source}", path.display())
            }
            PrivateDirError::Refused { path, problem } => {
                write!(f, "refusing directory {}: {problem}", path.display())
            }
        }
    }
}

impl std::error::Error for PrivateDirError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PrivateDirError::Io { source, .. } => Some(source),
            PrivateDirError::Refused { problem, .. } => Some(problem),
        }
    }
}

/// Environment variable naming devipc's runtime directory for host shared state.
pub const RUNTIME_DIR_ENV: &str = "DEVIPC_RUNTIME_DIR";

/// devipc's runtime directory for host shared state (HIP signal words, leases): the
/// private directory `$DEVIPC_RUNTIME_DIR`, else `/dev/shm/devipc-$UID`. Processes that
/// share devipc objects must agree on it.
pub fn runtime_dir() -> Result<PathBuf, PrivateDirError> {
    // Validated once per value of the variable: every lease hold and signal import asks.
    static CHECKED: std::sync::Mutex<Option<(Option<std::ffi::OsString>, PathBuf)>> =
        std::sync::Mutex::new(None);
    let var = std::env::var_os(RUNTIME_DIR_ENV).filter(|p| !p.is_empty());
    let mut checked = CHECKED.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((seen, dir)) = checked.as_ref()
        && *seen == var
        && dir.is_dir()
    {
        return Ok(dir.clone());
    }
    let path = match &var {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(format!("/dev/shm/devipc-{}", crate::sys::effective_uid())),
    };
    let dir = open_private_dir(&path)?;
    *checked = Some((var, dir.clone()));
    Ok(dir)
}

/// [`runtime_dir`] with devipc's errors: a refused directory (wrong owner or mode, a
/// symlink) is [`devipc_core::Error::Config`] naming [`RUNTIME_DIR_ENV`]; a failure to
/// create it is [`devipc_core::Error::Io`].
pub fn runtime_dir_for_devipc() -> devipc_core::Result<PathBuf> {
    runtime_dir().map_err(|e| match e {
        PrivateDirError::Refused { path, problem } => devipc_core::Error::config(
            format!(
                "the runtime directory {} ({RUNTIME_DIR_ENV})",
                path.display()
            ),
            format!("{problem}, or set {RUNTIME_DIR_ENV} to a directory of your own"),
        ),
        PrivateDirError::Io { op, path, source } => devipc_core::Error::io(
            format!(
                "{op} the runtime directory {} ({RUNTIME_DIR_ENV})",
                path.display()
            ),
            source,
        ),
    })
}

/// Removes the entries of `dir` named `<prefix><name>` for which `remove(name)` says
/// `Ok(true)` (it removed the entry itself); returns how many. Unreadable entries and
/// per-entry failures are skipped: a sweep is a best-effort cleanup.
pub fn sweep(
    dir: &Path,
    prefix: &str,
    mut remove: impl FnMut(&str) -> io::Result<bool>,
) -> io::Result<usize> {
    let mut removed = 0;
    for entry in fs::read_dir(dir)? {
        let Ok(entry) = entry else { continue };
        let file_name = entry.file_name();
        let Some(name) = file_name.to_str().and_then(|n| n.strip_prefix(prefix)) else {
            continue;
        };
        if remove(name).unwrap_or(false) {
            removed += 1;
        }
    }
    Ok(removed)
}

/// Opens the private directory at `path` (made absolute), creating it with mode 0700 if
/// missing, and validates it with [`check_dir_facts`] against the effective uid.
pub fn open_private_dir(path: &Path) -> Result<PathBuf, PrivateDirError> {
    let path = std::path::absolute(path).map_err(|e| PrivateDirError::io("resolve", path, e))?;
    match fs::symlink_metadata(&path) {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => create_private_dir(&path)?,
        Err(e) => return Err(PrivateDirError::io("stat", &path, e)),
    }
    let facts = DirFacts::of(&path).map_err(|e| PrivateDirError::io("stat", &path, e))?;
    check_dir_facts(&facts, crate::sys::effective_uid()).map_err(|problem| {
        PrivateDirError::Refused {
            path: path.clone(),
            problem,
        }
    })?;
    Ok(path)
}

fn create_private_dir(path: &Path) -> Result<(), PrivateDirError> {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).map_err(|e| PrivateDirError::io("create_dir_all", parent, e))?;
    }
    match fs::DirBuilder::new().mode(0o700).create(path) {
        Ok(()) => {
            // The umask may have cleared owner bits; set exactly 0700 on what we created.
            fs::set_permissions(path, fs::Permissions::from_mode(0o700))
                .map_err(|e| PrivateDirError::io("chmod", path, e))
        }
        // Another process created it concurrently: validate what is there.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(PrivateDirError::io("mkdir", path, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_other_owner() {
        // chown needs privileges, so test the pure rule on fabricated facts.
        let facts = DirFacts {
            is_symlink: false,
            is_dir: true,
            uid: 4321,
            mode: 0o700,
        };
        assert_eq!(
            check_dir_facts(&facts, 1234),
            Err(DirProblem::WrongOwner {
                owner: 4321,
                expected: 1234
            })
        );
        assert_eq!(check_dir_facts(&facts, 4321), Ok(()));
        let msg = DirProblem::WrongOwner {
            owner: 4321,
            expected: 1234,
        }
        .to_string();
        assert!(msg.contains("4321") && msg.contains("1234"), "{msg}");
        // Symlink is reported before anything else.
        let link = DirFacts {
            is_symlink: true,
            is_dir: false,
            ..facts
        };
        assert_eq!(check_dir_facts(&link, 1), Err(DirProblem::Symlink));
    }
}
