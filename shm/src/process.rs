//! Process identity that survives pid reuse: pid plus the process start time, and the pid
//! namespace both are meaningful in.
//!
//! The emulator's registry and devipc's leases record who holds a shared object as a
//! [`ProcessIdentity`]. A holder is reclaimed when its process is gone; since Linux reuses
//! pids, "a process with this pid exists" is not enough: the start time (field 22 of
//! `/proc/<pid>/stat`, in clock ticks since boot) must match too. A zombie (state `Z`/`X`)
//! counts as dead: it can no longer use or release anything.
//!
//! A pid and a start time mean something only in the pid namespace they were read in:
//! containers that share `/dev/shm` (`--ipc=host`, the containers of a Kubernetes pod)
//! share devipc's directories but not their pids. So an identity records its pid
//! namespace ([`ProcessIdentity::pid_ns`]), and [`ProcessIdentity::is_alive_in`] looks a
//! process up in `/proc` only when it is of the caller's namespace; a process of another
//! namespace is judged by its [liveness beacon](crate::liveness) instead.

use std::fmt;
use std::io;

/// Who holds an object: a pid and that process's start time (clock ticks since boot), in
/// the pid namespace `pid_ns`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProcessIdentity {
    /// The process id (thread-group id) in its pid namespace.
    pub pid: i32,
    /// Field 22 (`starttime`) of `/proc/<pid>/stat`.
    pub start_time: u64,
    /// The pid namespace `pid` belongs to: the inode of its `/proc/<pid>/ns/pid` (nsfs
    /// inodes are the kernel's `unsigned int`, so this is exact); 0 when unknown.
    pub pid_ns: u32,
}

/// The two fields of `/proc/<pid>/stat` devipc uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatFields {
    /// Field 3, the one-letter state (`R`, `S`, `D`, `Z`, `X`, ...).
    pub state: char,
    /// Field 20, the threads of the process. A leader whose main thread exited shows
    /// state `Z` while its other threads still run (then this is above 1).
    pub num_threads: u64,
    /// Field 22, start time in clock ticks since boot.
    pub start_time: u64,
}

impl StatFields {
    /// Whether the process is gone or a zombie waiting to be reaped; not a process whose
    /// main thread exited while others still run (its leader shows `Z`, with threads).
    pub fn is_dead(&self) -> bool {
        match self.state {
            'X' | 'x' => true,
            'Z' => self.num_threads <= 1,
            _ => false,
        }
    }
}

/// Why a `/proc/<pid>/stat` line could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatParseError(pub &'static str);

impl fmt::Display for StatParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "malformed /proc/<pid>/stat: {}", self.0)
    }
}

impl std::error::Error for StatParseError {}

/// Parses a `/proc/<pid>/stat` line. The command name (field 2) is enclosed in
/// parentheses and may itself contain spaces and parentheses, so fields are counted from
/// the *last* `)`.
pub fn parse_stat(line: &str) -> Result<StatFields, StatParseError> {
    let open = line.find('(').ok_or(StatParseError("no '(' before comm"))?;
    let close = line.rfind(')').ok_or(StatParseError("no ')' after comm"))?;
    if close < open {
        return Err(StatParseError("')' before '('"));
    }
    line[..open]
        .trim()
        .parse::<i32>()
        .map_err(|_| StatParseError("field 1 (pid) is not a number"))?;
    // After ")" come fields 3, 4, ...: field n is at index n - 3.
    let mut rest = line[close + 1..].split_ascii_whitespace();
    let state = rest
        .next()
        .and_then(|s| {
            let mut chars = s.chars();
            let c = chars.next()?;
            chars.next().is_none().then_some(c)
        })
        .ok_or(StatParseError(
            "field 3 (state) missing or not one character",
        ))?;
    let num_threads = rest
        .nth(20 - 4)
        .ok_or(StatParseError("fewer than 20 fields"))?
        .parse::<u64>()
        .map_err(|_| StatParseError("field 20 (num_threads) is not a number"))?;
    let start_time = rest
        .nth(22 - 21)
        .ok_or(StatParseError("fewer than 22 fields"))?
        .parse::<u64>()
        .map_err(|_| StatParseError("field 22 (starttime) is not a number"))?;
    Ok(StatFields {
        state,
        num_threads,
        start_time,
    })
}

/// Reads and parses `/proc/<pid>/stat`; `Ok(None)` when no such process exists.
pub fn read_stat(pid: i32) -> io::Result<Option<StatFields>> {
    if pid <= 0 {
        return Ok(None);
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(line) => parse_stat(&line)
            .map(Some)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e)),
        Err(e) if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ESRCH) => {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// The inode of the pid namespace of the process whose `/proc/<...>/ns/pid` is `link`;
/// 0 when it cannot be read (or does not fit: nsfs inodes are 32-bit).
fn pid_ns_inode(link: &str) -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(link)
        .ok()
        .and_then(|m| u32::try_from(m.ino()).ok())
        .unwrap_or(0)
}

/// What the calling process knows of itself: its identity, and whether the `/proc`
/// mounted here is its own pid namespace's.
#[derive(Debug, Clone, Copy)]
struct Myself {
    me: ProcessIdentity,
    proc_is_ours: bool,
}

/// Per-process cache of [`Myself`]: a forked child recomputes its own (without waiting
/// for a lock a parent thread held at the fork).
static CURRENT: devipc_core::PerProcess<Option<Myself>> =
    devipc_core::PerProcess::new(devipc_core::fork::forget_inherited);

/// The calling process's [`Myself`] (cached).
fn myself() -> io::Result<Myself> {
    let pid = std::process::id() as i32;
    let mut cached = CURRENT.lock();
    if let Some(known) = cached.filter(|k| k.me.pid == pid) {
        return Ok(known);
    }
    // `/proc/self`, not `/proc/<getpid()>`: in a pid namespace that kept its parent's
    // `/proc` (`unshare --pid --fork` without `--mount-proc`, some container setups), our
    // pid names another process there. `/proc/self` is always the caller, and its start
    // time and namespace link are the same whichever namespace's procfs shows them.
    let line = std::fs::read_to_string("/proc/self/stat")?;
    let stat = parse_stat(&line).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    let proc_pid = std::fs::read_link("/proc/self")
        .ok()
        .and_then(|p| p.to_str().and_then(|s| s.parse::<i32>().ok()));
    let known = Myself {
        me: ProcessIdentity {
            pid,
            start_time: stat.start_time,
            pid_ns: pid_ns_inode("/proc/self/ns/pid"),
        },
        proc_is_ours: proc_pid == Some(pid),
    };
    *cached = Some(known);
    Ok(known)
}

impl ProcessIdentity {
    /// The identity of the calling process (cached; recomputed after `fork`).
    pub fn current() -> io::Result<ProcessIdentity> {
        myself().map(|m| m.me)
    }

    /// Whether the `/proc` mounted here shows the calling process's own pid namespace
    /// (`/proc/self` is our `getpid()`): only then does a pid lookup there mean anything.
    pub fn proc_is_ours() -> bool {
        myself().is_ok_and(|m| m.proc_is_ours)
    }

    /// The pid namespace of the calling process (0 when unknown).
    pub fn current_pid_ns() -> u32 {
        ProcessIdentity::current()
            .map(|me| me.pid_ns)
            .unwrap_or_else(|_| pid_ns_inode("/proc/self/ns/pid"))
    }

    /// The identity of the live process `pid` of the caller's pid namespace, `Ok(None)` if
    /// there is none (or it is a zombie).
    pub fn of_pid(pid: i32) -> io::Result<Option<ProcessIdentity>> {
        Ok(read_stat(pid)?
            .filter(|s| !s.is_dead())
            .map(|s| ProcessIdentity {
                pid,
                start_time: s.start_time,
                pid_ns: ProcessIdentity::current_pid_ns(),
            }))
    }

    /// Whether this exact process still runs, as far as the files in `dir` (the
    /// directory where the identity was recorded: a lease table's, a word file's, the
    /// emulator's state directory) and `/proc` can tell:
    ///
    /// - the calling process itself is alive (without looking anything up: see
    ///   [`liveness`](crate::liveness) for why it must never open its own beacon);
    /// - a process of the caller's pid namespace (both namespaces known, and the `/proc`
    ///   mounted here that namespace's: [`ProcessIdentity::proc_is_ours`]) is looked up in
    ///   `/proc`: alive when a process with this pid exists, is not a zombie, and started
    ///   at the same time (so a reused pid is not mistaken for it);
    /// - any other (another namespace, either namespace unknown, or a `/proc` of another
    ///   namespace here) is alive while it holds its liveness beacon in `dir`
    ///   ([`liveness::beacon_alive`](crate::liveness::beacon_alive)).
    ///
    /// A process found dead has its beacon in `dir` removed.
    ///
    /// When something cannot be read for another reason (permissions, malformed line)
    /// the answer is `true`: nothing is reclaimed that cannot be proven dead.
    pub fn is_alive_in(&self, dir: &std::path::Path) -> bool {
        if crate::liveness::is_me(self) {
            return true;
        }
        let ours = ProcessIdentity::current_pid_ns();
        let alive = if self.pid_ns != 0 && self.pid_ns == ours && ProcessIdentity::proc_is_ours() {
            self.is_alive_by_pid()
        } else {
            crate::liveness::beacon_alive(dir, self)
        };
        if !alive {
            // Dead for good (pid, start time and namespace never come back): its beacon,
            // if any, goes with what the caller now reclaims.
            crate::liveness::forget_dead(dir, self);
        }
        alive
    }

    /// The `/proc` half of [`ProcessIdentity::is_alive_in`]: whether a process with this
    /// pid *in the caller's pid namespace* runs and started at this identity's start time.
    /// Meaningless for an identity of another namespace.
    pub fn is_alive_by_pid(&self) -> bool {
        match read_stat(self.pid) {
            Ok(Some(stat)) => self.matches(&stat),
            Ok(None) => false,
            Err(_) => true,
        }
    }

    /// The pure part of [`ProcessIdentity::is_alive_by_pid`]: whether a stat of this pid
    /// describes this live process.
    pub fn matches(&self, stat: &StatFields) -> bool {
        !stat.is_dead() && stat.start_time == self.start_time
    }
}

impl fmt::Display for ProcessIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "pid {} (started at tick {}, pid namespace {})",
            self.pid, self.start_time, self.pid_ns
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat_line(comm: &str, state: char, start: u64) -> String {
        // Fields 4..=21 are 18 numbers, then 22 = start time, then a few more.
        let middle = (4..=21)
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join(" ");
        format!("4242 ({comm}) {state} {middle} {start} 23 24 25\n")
    }

    #[test]
    fn reads_the_thread_count() {
        let line = stat_line("x", 'Z', 5);
        assert_eq!(parse_stat(&line).unwrap().num_threads, 20);
        let mine = read_stat(std::process::id() as i32).unwrap().unwrap();
        assert!(mine.num_threads >= 1);
        assert!(!mine.is_dead());
    }

    #[test]
    fn parses_plain_and_hostile_comm() {
        for comm in ["bash", "a b", "x) S 1 2 (y", "((", ")", ""] {
            let f = parse_stat(&stat_line(comm, 'S', 987654)).unwrap();
            assert_eq!(f.state, 'S', "comm {comm:?}");
            assert_eq!(f.start_time, 987654, "comm {comm:?}");
        }
    }

    #[test]
    fn rejects_malformed_lines() {
        assert!(parse_stat("").is_err());
        assert!(parse_stat("12 (x S 1 2").is_err());
        assert!(parse_stat("12 x) S 1 2").is_err());
        assert!(parse_stat("abc (x) S 1 2").is_err());
        assert!(parse_stat("12 (x) S 4 5 6").is_err());
        assert!(parse_stat(&stat_line("x", 'S', 1).replace(" 1 23", " q 23")).is_err());
        assert!(parse_stat("12 (x) SS 4").is_err());
    }

    #[test]
    fn current_process_is_alive() {
        let me = ProcessIdentity::current().unwrap();
        assert_eq!(me.pid, std::process::id() as i32);
        assert_ne!(me.pid_ns, 0, "procfs should expose /proc/self/ns/pid");
        assert!(me.is_alive_by_pid());
        assert!(me.is_alive_in(&std::env::temp_dir()));
        assert_eq!(ProcessIdentity::of_pid(me.pid).unwrap(), Some(me));
    }

    #[test]
    fn pid_reuse_is_detected_by_start_time() {
        let me = ProcessIdentity::current().unwrap();
        // Same pid, different start time: a different process that reused the pid.
        let impostor = ProcessIdentity {
            start_time: me.start_time + 1,
            ..me
        };
        assert!(!impostor.is_alive_by_pid());
        assert!(!impostor.is_alive_in(&std::env::temp_dir()));
        let stat = StatFields {
            state: 'R',
            num_threads: 1,
            start_time: me.start_time,
        };
        assert!(me.matches(&stat));
        assert!(!impostor.matches(&stat));
        assert!(!me.matches(&StatFields { state: 'Z', ..stat }));
        // A leader whose main thread exited while another thread runs is alive.
        assert!(me.matches(&StatFields {
            state: 'Z',
            num_threads: 2,
            ..stat
        }));
        assert!(!me.matches(&StatFields { state: 'X', ..stat }));
    }

    #[test]
    fn nonexistent_pids_are_dead() {
        let ns = ProcessIdentity::current_pid_ns();
        let dir = std::env::temp_dir();
        for (pid, start_time) in [(0, 0), (-5, 0), (0x7fff_fff0, 1)] {
            // Above the kernel's pid_max limit (4194304), so never a live process.
            let who = ProcessIdentity {
                pid,
                start_time,
                pid_ns: ns,
            };
            assert!(!who.is_alive_by_pid(), "{who}");
            assert!(!who.is_alive_in(&dir), "{who}");
        }
    }

    #[test]
    fn a_live_pid_of_another_namespace_is_not_looked_up_here() {
        // Our own pid and start time, but named in another pid namespace: /proc says
        // nothing about it, and without its beacon it is dead.
        let me = ProcessIdentity::current().unwrap();
        let elsewhere = ProcessIdentity {
            pid_ns: me.pid_ns.wrapping_add(1),
            ..me
        };
        assert!(
            elsewhere.is_alive_by_pid(),
            "the pid lookup alone is fooled"
        );
        let dir = std::env::temp_dir().join(format!("devipc-ns-{}", std::process::id()));
        let dir = crate::private_dir::open_private_dir(&dir).unwrap();
        assert!(!elsewhere.is_alive_in(&dir));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
