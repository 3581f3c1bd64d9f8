//! The private state directory: creation with mode 0700 and safety validation.
//!
//! Everything the emulated processes share lives in one directory (default
//! `/dev/shm/devipc-emu-$UID`). Because other users can create entries in `/dev/shm`, the
//! directory is refused unless it is a real directory (not a symlink), owned by the
//! effective uid, and not accessible to group or others. A missing directory is created
//! with mode 0700 (parents with default permissions). After validation all files are
//! created inside it with mode 0600; since nobody else can enter a 0700 directory, paths
//! below it cannot be swapped by another user, and the directory itself sits in a sticky
//! `/dev/shm` where others cannot rename it.
//!
//! The validation rule is the pure function [`check_dir_facts`], so the "owned by another
//! uid" refusal is testable without `chown`.

use std::fmt;
use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::error::EmuError;

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
                "it is owned by uid {owner}, not by this user (uid {expected}); \
                 set DEVIPC_EMU_DIR to a directory of your own"
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

/// A validated state directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmuDir {
    path: PathBuf,
}

impl EmuDir {
    /// Opens the state directory at `path`, creating it (mode 0700) if missing, and
    /// validates it with [`check_dir_facts`] against the effective uid.
    pub fn open(path: impl AsRef<Path>) -> Result<EmuDir, EmuError> {
        let path = std::path::absolute(path.as_ref())
            .map_err(|e| EmuError::io("resolve", path.as_ref(), e))?;
        match fs::symlink_metadata(&path) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => create_private_dir(&path)?,
            Err(e) => return Err(EmuError::io("stat", &path, e)),
        }
        let facts = DirFacts::of(&path).map_err(|e| EmuError::io("stat", &path, e))?;
        check_dir_facts(&facts, crate::sys::effective_uid()).map_err(|problem| {
            EmuError::StateDir {
                path: path.clone(),
                problem,
            }
        })?;
        Ok(EmuDir { path })
    }

    /// The directory's absolute path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The path of the entry `name` inside the directory.
    pub fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// The names of all entries (unsorted). Only [`crate::gc`] and tests scan the
    /// directory; the hot paths never do.
    pub fn entry_names(&self) -> Result<Vec<String>, EmuError> {
        let read = fs::read_dir(&self.path).map_err(|e| EmuError::io("read_dir", &self.path, e))?;
        let mut names = Vec::new();
        for entry in read {
            let entry = entry.map_err(|e| EmuError::io("read_dir", &self.path, e))?;
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
        Ok(names)
    }

    /// Deletes the directory and everything in it (for tests and explicit resets). Any
    /// process still using it keeps its mappings but can no longer find shared objects.
    pub fn remove_all(self) -> Result<(), EmuError> {
        fs::remove_dir_all(&self.path).map_err(|e| EmuError::io("remove_dir_all", &self.path, e))
    }
}

fn create_private_dir(path: &Path) -> Result<(), EmuError> {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).map_err(|e| EmuError::io("create_dir_all", parent, e))?;
    }
    match fs::DirBuilder::new().mode(0o700).create(path) {
        Ok(()) => {
            // The umask may have cleared owner bits; set exactly 0700 on what we created.
            fs::set_permissions(path, fs::Permissions::from_mode(0o700))
                .map_err(|e| EmuError::io("chmod", path, e))
        }
        // Another process created it concurrently: validate what is there.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(EmuError::io("mkdir", path, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let p =
            std::env::temp_dir().join(format!("devipc-emu-dirtest-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&p);
        let _ = fs::remove_file(&p);
        p
    }

    fn refusal(r: Result<EmuDir, EmuError>) -> DirProblem {
        match r {
            Err(EmuError::StateDir { problem, .. }) => problem,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn creates_with_mode_0700() {
        let p = scratch("create").join("nested");
        let d = EmuDir::open(&p).unwrap();
        let facts = DirFacts::of(d.path()).unwrap();
        assert_eq!(facts.mode, 0o700);
        assert!(facts.is_dir);
        // Reopening an existing valid directory works.
        assert_eq!(EmuDir::open(&p).unwrap(), d);
        d.remove_all().unwrap();
        fs::remove_dir(p.parent().unwrap()).unwrap();
    }

    #[test]
    fn refuses_symlink() {
        let target = scratch("symlink-target");
        let link = scratch("symlink");
        EmuDir::open(&target).unwrap();
        std::os::unix::fs::symlink(&target, &link).unwrap();
        assert_eq!(refusal(EmuDir::open(&link)), DirProblem::Symlink);
        fs::remove_file(&link).unwrap();
        fs::remove_dir(&target).unwrap();
    }

    #[test]
    fn refuses_non_directory() {
        let p = scratch("file");
        fs::write(&p, b"x").unwrap();
        assert_eq!(refusal(EmuDir::open(&p)), DirProblem::NotDirectory);
        fs::remove_file(&p).unwrap();
    }

    #[test]
    fn refuses_group_or_other_access() {
        let p = scratch("perm");
        fs::create_dir(&p).unwrap();
        for mode in [0o750, 0o705, 0o777, 0o710] {
            fs::set_permissions(&p, fs::Permissions::from_mode(mode)).unwrap();
            assert_eq!(
                refusal(EmuDir::open(&p)),
                DirProblem::TooPermissive { mode }
            );
        }
        fs::set_permissions(&p, fs::Permissions::from_mode(0o700)).unwrap();
        EmuDir::open(&p).unwrap().remove_all().unwrap();
    }

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
        assert!(
            msg.contains("4321") && msg.contains("DEVIPC_EMU_DIR"),
            "{msg}"
        );
        // Symlink is reported before anything else.
        let link = DirFacts {
            is_symlink: true,
            is_dir: false,
            ..facts
        };
        assert_eq!(check_dir_facts(&link, 1), Err(DirProblem::Symlink));
    }
}
