//! The private state directory: creation with mode 0700 and safety validation.
//!
//! Everything the emulated processes share lives in one directory (default
//! `/dev/shm/devipc-emu-$UID`). Because other users can create entries in `/dev/shm`, the
//! directory is refused unless it is a real directory (not a symlink), owned by the
//! effective uid, and not accessible to group or others; every component on the way from
//! `/` must be owned by root or the user and not writable by others unless sticky (as
//! OpenSSH's `StrictModes` checks; root's and the user's own symlinks on the way are
//! followed and their targets checked). A missing directory and missing parents are
//! created with mode 0700. After validation all files are created inside it with mode
//! 0600; since nobody else can enter a 0700 directory, paths below it cannot be swapped
//! by another user, and no parent can be renamed away by another user either.
//!
//! The validation (and the pure rule [`check_dir_facts`]) is `devipc-shm`'s
//! [`private_dir`](devipc_shm::private_dir), shared with the HIP backend's signal words.

use std::fs;
use std::path::{Path, PathBuf};

pub use devipc_shm::private_dir::{DirFacts, DirProblem, check_dir_facts};
use devipc_shm::private_dir::{PrivateDirError, open_private_dir};

use crate::error::EmuError;

/// A validated state directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmuDir {
    path: PathBuf,
}

impl EmuDir {
    /// Opens the state directory at `path`, creating it (mode 0700) if missing, and
    /// validates it with [`check_dir_facts`] against the effective uid.
    pub fn open(path: impl AsRef<Path>) -> Result<EmuDir, EmuError> {
        match open_private_dir(path.as_ref()) {
            Ok(path) => Ok(EmuDir { path }),
            Err(PrivateDirError::Refused { path, problem }) => {
                Err(EmuError::StateDir { path, problem })
            }
            Err(PrivateDirError::Io { op, path, source }) => Err(EmuError::io(op, &path, source)),
        }
    }

    /// The directory's absolute path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The path of the entry `name` inside the directory.
    pub fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// The names of all entries (unsorted) but the processes' liveness beacons
    /// ([`devipc_shm::liveness`]: how processes of other pid namespaces are known to be
    /// alive, not shared objects; [`crate::gc`] sweeps the dead ones). Only gc and tests
    /// scan the directory; the hot paths never do.
    pub fn entry_names(&self) -> Result<Vec<String>, EmuError> {
        let read = fs::read_dir(&self.path).map_err(|e| EmuError::io("read_dir", &self.path, e))?;
        let mut names = Vec::new();
        for entry in read {
            let entry = entry.map_err(|e| EmuError::io("read_dir", &self.path, e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if !devipc_shm::liveness::is_beacon_name(&name) {
                names.push(name);
            }
        }
        Ok(names)
    }

    /// Deletes the directory and everything in it (for tests and explicit resets). Any
    /// process still using it keeps its mappings but can no longer find shared objects.
    pub fn remove_all(self) -> Result<(), EmuError> {
        fs::remove_dir_all(&self.path).map_err(|e| EmuError::io("remove_dir_all", &self.path, e))
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

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
    fn refuses_a_parent_others_can_write() {
        let open = scratch("open-parent");
        fs::create_dir(&open).unwrap();
        fs::set_permissions(&open, fs::Permissions::from_mode(0o777)).unwrap();
        let err = EmuDir::open(open.join("emu")).unwrap_err();
        let msg = err.to_string();
        match refusal(Err(err)) {
            DirProblem::UnsafeComponent { component, .. } => {
                assert_eq!(component, fs::canonicalize(&open).unwrap())
            }
            other => panic!("expected an unsafe component, got {other:?}"),
        }
        assert!(
            msg.contains(&open.display().to_string()) && msg.contains("0777"),
            "{msg}"
        );
        assert!(!open.join("emu").exists());
        fs::remove_dir(&open).unwrap();
    }

    #[test]
    fn refusal_message_names_the_override() {
        let err = EmuError::StateDir {
            path: "/dev/shm/x".into(),
            problem: DirProblem::WrongOwner {
                owner: 4321,
                expected: 1234,
            },
        };
        let msg = err.to_string();
        assert!(
            msg.contains("4321") && msg.contains("DEVIPC_EMU_DIR"),
            "{msg}"
        );
    }
}
