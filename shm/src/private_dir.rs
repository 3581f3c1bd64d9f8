//! Private directories for shared state: created with mode 0700, refused unless safe.
//!
//! Files that several processes of one user map or lock live in a directory under
//! `/dev/shm` (the emulator's state, the HIP backend's signal words). Because other users
//! can create entries in `/dev/shm`, a directory is refused unless it is a real directory
//! (not a symlink), owned by the effective uid, and not accessible to group or others
//! ([`check_dir_facts`]). Since nobody else can enter a 0700 directory, paths below it
//! cannot be swapped by another user.
//!
//! The path *to* the directory is checked too, as OpenSSH's `StrictModes` (`safe_path`)
//! does: every component from `/` down must be a directory owned by root or by us, and
//! not writable by group or others unless it is sticky (like `/tmp` and `/dev/shm`, where
//! others cannot rename or delete our entries) ([`check_component_facts`]). Otherwise
//! another user could rename a parent away and put a directory of their own in its place
//! between our check and our use.
//!
//! Symbolic links (a choice): a link on the way that belongs to root or to us (system
//! links such as `/var/run -> /run`, or `/dev/shm -> /run/shm` on older distributions)
//! is followed, like `realpath`, and the components of its target are then checked as
//! real components; the directory holding the link has passed the check already, so
//! nobody else can replace the link. A link owned by anyone else is refused, and so is a
//! link as the private directory itself or as a component devipc creates. The directory
//! is reported by its real path. Missing components are created with mode 0700.
//!
//! The rules are the pure functions [`check_dir_facts`] and [`check_component_facts`], so
//! the "owned by another uid" refusals are testable without `chown`.

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
    /// Group gid.
    pub gid: u32,
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
            gid: m.gid(),
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
    /// The path is empty (an empty variable is not "unset").
    Empty,
    /// A component on the way to the directory is unsafe ([`check_component_facts`]).
    UnsafeComponent {
        /// The component, as a real path (symbolic links before it resolved).
        component: PathBuf,
        /// What is wrong with it.
        problem: ComponentProblem,
    },
}

/// Why a component on the way to a private directory is unsafe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ComponentProblem {
    /// It belongs to a user other than root and us.
    WrongOwner {
        /// Its owner.
        owner: u32,
    },
    /// Group or others may write to it and it is not sticky.
    Writable {
        /// Its permission bits.
        mode: u32,
    },
    /// A symbolic link owned by a user other than root and us, or a link where devipc
    /// creates the directories.
    Symlink {
        /// Its owner.
        owner: u32,
    },
    /// It exists and is neither a directory nor a symbolic link.
    NotDirectory,
    /// More than [`MAX_SYMLINKS`] symbolic links were followed (a loop).
    TooManySymlinks,
    /// A `..` follows a component that does not exist yet.
    DotDotAfterMissing,
}

impl fmt::Display for ComponentProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ComponentProblem::WrongOwner { owner } => write!(
                f,
                "it is owned by uid {owner}, neither root nor this user (uid {})",
                crate::os::effective_uid()
            ),
            ComponentProblem::Writable { mode } => write!(
                f,
                "its mode {mode:04o} lets group/others write and it is not sticky, so they \
                 could replace what lies below it"
            ),
            ComponentProblem::Symlink { owner } => write!(
                f,
                "it is a symbolic link owned by uid {owner}; only links of root or this user \
                 are followed, and none where devipc creates directories"
            ),
            ComponentProblem::NotDirectory => f.write_str("it is not a directory"),
            ComponentProblem::TooManySymlinks => {
                write!(f, "more than {MAX_SYMLINKS} symbolic links (a loop?)")
            }
            ComponentProblem::DotDotAfterMissing => {
                f.write_str("`..` after a component that does not exist")
            }
        }
    }
}

/// Most symbolic links followed on the way to a private directory (Linux's own limit).
pub const MAX_SYMLINKS: usize = 40;

/// The rule for a component on the way to a private directory: a directory (or a
/// symbolic link to be followed) owned by root or `uid`; a directory must not be
/// writable by group or others unless it is sticky. As in OpenSSH's
/// `secure_permissions`, a group-writable directory of `uid`'s own is fine when its group
/// has no member but `uid` (a user-private group: Debian's default umask 002 makes every
/// directory a user creates group-writable).
pub fn check_component_facts(facts: &DirFacts, uid: u32) -> Result<(), ComponentProblem> {
    if facts.is_symlink {
        return if facts.uid == 0 || facts.uid == uid {
            Ok(())
        } else {
            Err(ComponentProblem::Symlink { owner: facts.uid })
        };
    }
    if !facts.is_dir {
        return Err(ComponentProblem::NotDirectory);
    }
    if facts.uid != 0 && facts.uid != uid {
        return Err(ComponentProblem::WrongOwner { owner: facts.uid });
    }
    let sticky = facts.mode & 0o1000 != 0;
    let others_write = facts.mode & 0o002 != 0;
    let group_write = facts.mode & 0o020 != 0;
    let own_private_group = facts.uid == uid && user_private_group(uid) == Some(facts.gid);
    if !sticky && (others_write || (group_write && !own_private_group)) {
        return Err(ComponentProblem::Writable { mode: facts.mode });
    }
    Ok(())
}

/// The gid of `uid`'s user-private group: its primary group, when no other user has that
/// primary group and the group lists no member but the user (`/etc/passwd`,
/// `/etc/group`). `None` when that cannot be established (e.g. accounts only in a
/// directory service): then group-writable directories are refused.
pub fn user_private_group(uid: u32) -> Option<u32> {
    // Per process (fork-safe): the answer does not change, so a child may keep it.
    static CACHE: devipc_core::PerProcess<Option<(u32, Option<u32>)>> =
        devipc_core::PerProcess::new(|inherited| inherited.flatten());
    let mut cache = CACHE.lock();
    if let Some((cached_uid, gid)) = *cache
        && cached_uid == uid
    {
        return gid;
    }
    let passwd = fs::read_to_string("/etc/passwd").ok();
    let group = fs::read_to_string("/etc/group").ok();
    let gid = private_group_in(uid, passwd.as_deref()?, group.as_deref()?);
    *cache = Some((uid, gid));
    gid
}

/// [`user_private_group`] over the texts of `/etc/passwd` and `/etc/group`.
fn private_group_in(uid: u32, passwd: &str, group: &str) -> Option<u32> {
    // passwd: name:password:uid:gid:...
    let users: Vec<(&str, u32, u32)> = passwd
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            Some((
                *f.first()?,
                f.get(2)?.parse().ok()?,
                f.get(3)?.parse().ok()?,
            ))
        })
        .collect();
    let &(name, _, gid) = users.iter().find(|u| u.1 == uid)?;
    if users.iter().any(|u| u.2 == gid && u.1 != uid) {
        return None;
    }
    // group: name:password:gid:member,member
    let line = group.lines().find(|l| {
        l.split(':')
            .nth(2)
            .and_then(|g| g.parse::<u32>().ok())
            .is_some_and(|g| g == gid)
    })?;
    let members = line.split(':').nth(3).unwrap_or("");
    members
        .split(',')
        .filter(|m| !m.is_empty())
        .all(|m| m == name)
        .then_some(gid)
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
            DirProblem::Empty => f.write_str(
                "the path is empty; unset the variable to use the default, or name a directory",
            ),
            DirProblem::UnsafeComponent { component, problem } => {
                write!(
                    f,
                    "the component {} is unsafe: {problem}",
                    component.display()
                )
            }
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
    // Per process (fork-safe); a forked child validates again.
    static CHECKED: devipc_core::PerProcess<Option<(Option<std::ffi::OsString>, PathBuf)>> =
        devipc_core::PerProcess::new(devipc_core::fork::forget_inherited);
    // An empty value is refused by open_private_dir, not taken as unset.
    let var = std::env::var_os(RUNTIME_DIR_ENV);
    let mut checked = CHECKED.lock();
    if let Some((seen, dir)) = checked.as_ref()
        && *seen == var
        && dir.is_dir()
    {
        return Ok(dir.clone());
    }
    let path = match &var {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(format!("/dev/shm/devipc-{}", crate::os::effective_uid())),
    };
    let dir = open_private_dir(&path)?;
    *checked = Some((var, dir.clone()));
    Ok(dir)
}

/// [`runtime_dir`] with devipc's errors: a refused directory (wrong owner or mode, a
/// symlink) is [`devipc_core::Error::Config`] naming [`RUNTIME_DIR_ENV`]; a failure to
/// create it is [`devipc_core::Error::Io`].
pub fn runtime_dir_for_devipc() -> devipc_core::Result<PathBuf> {
    runtime_dir().map_err(runtime_dir_error)
}

fn runtime_dir_error(e: PrivateDirError) -> devipc_core::Error {
    match e {
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
    }
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

/// Opens a file of a devipc directory for reading, refusing what a plain `open` would
/// trip over: a symbolic link (`O_NOFOLLOW`), and anything that is not a regular file, such
/// as a FIFO someone placed there (opened `O_NONBLOCK`, so the open itself cannot hang,
/// then checked with `fstat`). Errors are `InvalidData` for a wrong kind of file.
pub fn open_regular_file(path: &Path) -> io::Result<fs::File> {
    open_regular(path, fs::OpenOptions::new().read(true))
}

/// As [`open_regular_file`], with the caller's `options` (e.g. append, create, mode).
pub fn open_regular(path: &Path, options: &mut fs::OpenOptions) -> io::Result<fs::File> {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let file = options
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)?;
    let kind = file.metadata()?.file_type();
    if !kind.is_file() {
        let what = if kind.is_fifo() {
            "a FIFO"
        } else {
            "not a regular file"
        };
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} is {what}", path.display()),
        ));
    }
    Ok(file)
}

/// Opens the private directory at `path` (made absolute), creating it and any missing
/// parent with mode 0700, after checking every component on the way with
/// [`check_component_facts`] (following root's and our symbolic links, see the module
/// docs) and the directory itself with [`check_dir_facts`], against the effective uid.
/// Returns the directory's real path.
pub fn open_private_dir(path: &Path) -> Result<PathBuf, PrivateDirError> {
    let uid = crate::os::effective_uid();
    if path.as_os_str().is_empty() {
        return Err(PrivateDirError::Refused {
            path: PathBuf::new(),
            problem: DirProblem::Empty,
        });
    }
    let abs = std::path::absolute(path).map_err(|e| PrivateDirError::io("resolve", path, e))?;
    let refuse = |problem: DirProblem| PrivateDirError::Refused {
        path: abs.clone(),
        problem,
    };
    let (Some(parent), Some(name)) = (abs.parent(), abs.file_name()) else {
        return Err(PrivateDirError::io(
            "resolve",
            &abs,
            io::Error::new(io::ErrorKind::InvalidInput, "the path has no final name"),
        ));
    };
    let (mut real, missing) = walk_existing(parent, uid).map_err(|(component, problem)| {
        refuse(DirProblem::UnsafeComponent { component, problem })
    })?;
    // Parents devipc creates: real directories of ours, never links.
    for part in missing {
        real.push(part);
        create_dir_0700(&real)?;
        let facts = DirFacts::of(&real).map_err(|e| PrivateDirError::io("stat", &real, e))?;
        let problem = if facts.is_symlink {
            Some(ComponentProblem::Symlink { owner: facts.uid })
        } else {
            check_component_facts(&facts, uid).err()
        };
        if let Some(problem) = problem {
            return Err(refuse(DirProblem::UnsafeComponent {
                component: real,
                problem,
            }));
        }
    }
    let dir = real.join(name);
    match fs::symlink_metadata(&dir) {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => create_dir_0700(&dir)?,
        Err(e) => return Err(PrivateDirError::io("stat", &dir, e)),
    }
    let facts = DirFacts::of(&dir).map_err(|e| PrivateDirError::io("stat", &dir, e))?;
    check_dir_facts(&facts, uid).map_err(|problem| PrivateDirError::Refused {
        path: dir.clone(),
        problem,
    })?;
    Ok(dir)
}

/// Resolves the absolute path `path` component by component from `/`, like `realpath`,
/// checking each existing component with [`check_component_facts`]. Returns the real path
/// of the longest existing prefix and the names below it that do not exist yet, or the
/// offending component (real path) and its problem. A component that cannot be `lstat`ed
/// for another reason than absence counts as missing: creating it then fails with the
/// OS error.
fn walk_existing(
    path: &Path,
    uid: u32,
) -> Result<(PathBuf, Vec<std::ffi::OsString>), (PathBuf, ComponentProblem)> {
    use std::collections::VecDeque;
    use std::ffi::OsString;
    use std::path::Component;

    fn push_components(pending: &mut VecDeque<OsString>, path: &Path) {
        for c in path.components().rev() {
            match c {
                Component::Normal(n) => pending.push_front(n.to_owned()),
                Component::ParentDir => pending.push_front(OsString::from("..")),
                Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            }
        }
    }

    let root = PathBuf::from("/");
    let check = |p: &Path| -> Result<(), (PathBuf, ComponentProblem)> {
        match DirFacts::of(p) {
            Ok(facts) => check_component_facts(&facts, uid).map_err(|e| (p.to_owned(), e)),
            // `/` always exists; any other failure surfaces when the directory is used.
            Err(_) => Ok(()),
        }
    };
    check(&root)?;
    let mut real = root.clone();
    let mut pending = VecDeque::new();
    push_components(&mut pending, path);
    let mut links = 0;
    while let Some(part) = pending.pop_front() {
        if part == ".." {
            real.pop();
            continue;
        }
        let next = real.join(&part);
        let facts = match DirFacts::of(&next) {
            Ok(facts) => facts,
            Err(_) => {
                let mut missing = vec![part];
                missing.extend(pending);
                if missing.iter().any(|m| m == "..") {
                    return Err((next, ComponentProblem::DotDotAfterMissing));
                }
                return Ok((real, missing));
            }
        };
        check_component_facts(&facts, uid).map_err(|e| (next.clone(), e))?;
        if facts.is_symlink {
            links += 1;
            if links > MAX_SYMLINKS {
                return Err((next, ComponentProblem::TooManySymlinks));
            }
            let target =
                fs::read_link(&next).map_err(|_| (next.clone(), ComponentProblem::NotDirectory))?;
            if target.is_absolute() {
                real = root.clone();
            }
            push_components(&mut pending, &target);
            continue;
        }
        real = next;
    }
    Ok((real, Vec::new()))
}

/// Creates `path` with mode exactly 0700 (whatever the umask); an existing entry is left
/// for the caller to validate (another process may have created it concurrently).
fn create_dir_0700(path: &Path) -> Result<(), PrivateDirError> {
    match fs::DirBuilder::new().mode(0o700).create(path) {
        Ok(()) => fs::set_permissions(path, fs::Permissions::from_mode(0o700))
            .map_err(|e| PrivateDirError::io("chmod", path, e)),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(PrivateDirError::io("mkdir", path, e)),
    }
}

#[cfg(test)]
mod tests;
