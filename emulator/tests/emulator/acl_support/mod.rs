//! Harness of the ACL surface tests: real child processes that call the C ABI.
//!
//! Every ACL call runs in a child process started with `devipc_testkit` (the test binary
//! re-run on the `child_role` test of the module that starts it): the child becomes an
//! *ACL shell*: it reads one command per line from stdin (`malloc 4096`, `import 123 0`,
//! ...), makes that one call through the [`AclApi`] table of `devipc_emulator::acl_api()`,
//! and answers `@@ ok <values...>` or `@@ err <code> <aclGetRecentErrMsg text>` on stdout
//! (other output is ignored). Handles and pointers travel as hex, keys as their text.
//! The child finds its state directory through the real `DEVIPC_EMU_*` variables, so each
//! test gives its children its own [`TestRoot`]; the parent never calls ACL itself and
//! inspects the state directory with an explicit `State` ([`EmuRoot`]: gc, usage,
//! leftovers).

use std::ffi::{CStr, c_char, c_void};
use std::ptr;
use std::time::{Duration, Instant};

use devipc_ascend_sys::AclApi;
use devipc_ascend_sys::types::*;
use devipc_testkit::Child;

pub use crate::emu_support::{EmuRoot, pattern};
use crate::emu_support::{child_entry, unhex64};
pub use devipc_testkit::TestRoot;

/// A child that lives longer than this kills itself, so a broken test leaves no process.
const CHILD_WATCHDOG: Duration = Duration::from_secs(300);

// ---------------------------------------------------------------------------------------
// Parent side.

/// Starting ACL shells on a test root.
pub trait AclRoot {
    /// Starts an ACL shell child with this root's state directory and extra variables, on
    /// the caller's module's `child_role` test.
    #[track_caller]
    fn spawn(&self, name: &str, env: &[(&str, &str)]) -> Acl;
}

impl AclRoot for TestRoot {
    #[track_caller]
    fn spawn(&self, name: &str, env: &[(&str, &str)]) -> Acl {
        Acl::spawn(name, self, env)
    }
}

/// A failed call: the code and the `aclGetRecentErrMsg` text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub code: i32,
    pub message: String,
}

impl Failure {
    /// Asserts the code and that the message names `rule`.
    #[track_caller]
    pub fn expect(&self, code: i32, rule: &str) {
        assert_eq!(self.code, code, "wrong code; message: {}", self.message);
        assert!(
            self.message.contains(&format!("[rule {rule}]")),
            "message does not name rule {rule}: {}",
            self.message
        );
        // The rule table agrees with the code.
        let info = devipc_emulator::acl::rules::info(rule).expect("rule in the table");
        if info.code != 0 {
            assert_eq!(info.code, code, "rule table code of {rule}");
        }
    }
}

/// An ACL shell child process (the role is its name); killed and reaped on drop.
pub struct Acl {
    child: Child,
}

impl Acl {
    #[track_caller]
    fn spawn(name: &str, root: &TestRoot, env: &[(&str, &str)]) -> Acl {
        let mut child = Child::build(&child_entry(), name, root)
            .env_remove("DEVIPC_EMU_BREAK_RULE")
            .env_remove("DEVIPC_EMU_MEM_LIMIT")
            .env_remove("DEVIPC_EMU_DEVICES")
            .env_remove("DEVIPC_EMU_ASCEND_PHY_IDS")
            .env_remove("DEVIPC_EMU_ASCEND_SET_ACCESS_IDS")
            // The caller's visibility variable would renumber the child's devices (issue 16).
            .env_remove("ASCEND_RT_VISIBLE_DEVICES")
            .envs(env.iter().copied())
            .spawn();
        child.expect("ready");
        Acl { child }
    }

    fn name(&self) -> &str {
        self.child.role()
    }

    /// The child's pid.
    pub fn pid(&self) -> i32 {
        self.child.pid() as i32
    }

    /// Sends a command without waiting for its answer (for calls that block).
    pub fn send(&mut self, cmd: &str) {
        self.child.send(cmd);
    }

    /// The answer to the last command sent.
    pub fn reply(&mut self) -> Result<Vec<String>, Failure> {
        let (kind, rest) = self.child.expect_one_of(&["ok", "err"]);
        if kind == "ok" {
            return Ok(rest.split_whitespace().map(str::to_owned).collect());
        }
        let (code, message) = rest.split_once(' ').unwrap_or((&rest, ""));
        Err(Failure {
            code: code.parse().unwrap_or(i32::MIN),
            message: message.to_owned(),
        })
    }

    /// Runs a command that must succeed; returns its values.
    #[track_caller]
    pub fn ok(&mut self, cmd: &str) -> Vec<String> {
        self.send(cmd);
        match self.reply() {
            Ok(v) => v,
            Err(f) => panic!(
                "{}: `{cmd}` failed with {}: {}",
                self.name(),
                f.code,
                f.message
            ),
        }
    }

    /// Runs a command that must succeed and returns its single value.
    #[track_caller]
    pub fn val(&mut self, cmd: &str) -> String {
        let v = self.ok(cmd);
        assert_eq!(v.len(), 1, "`{cmd}` returned {v:?}");
        v.into_iter().next().unwrap()
    }

    /// Runs a command that must fail; returns the failure.
    #[track_caller]
    pub fn fail(&mut self, cmd: &str) -> Failure {
        self.send(cmd);
        match self.reply() {
            Ok(v) => panic!(
                "{}: `{cmd}` succeeded with {v:?}, expected a failure",
                self.name()
            ),
            Err(f) => f,
        }
    }

    /// Runs a command that must fail with `code`, naming `rule`.
    #[track_caller]
    pub fn fails(&mut self, cmd: &str, code: i32, rule: &str) {
        self.fail(cmd).expect(code, rule);
    }

    /// Ends the shell normally and checks its exit status.
    pub fn exit(mut self) {
        self.send("exit");
        self.child.wait_success();
    }

    /// Sends `cmd`, which must kill the child, and returns how it ended.
    pub fn run_fatal(mut self, cmd: &str) -> std::process::ExitStatus {
        self.send(cmd);
        self.child.wait()
    }

    /// SIGKILL, then waits until the kernel has killed it (zombie or gone) without
    /// reaping; [`Acl::reap`] reaps.
    pub fn kill9(&mut self) {
        self.child.kill_no_reap();
    }

    /// Reaps a killed child.
    pub fn reap(&mut self) {
        self.child.reap();
    }
}

// ---------------------------------------------------------------------------------------
// Child side: the ACL shell.

/// Entry of child processes (call from each topic module's `child_role` test); returns at
/// once in the parent.
pub fn child_main() {
    devipc_testkit::run_child_within(CHILD_WATCHDOG, |_name, parent| {
        let mut shell = Shell {
            api: devipc_emulator::acl_api(),
        };
        parent.say("ready", &std::process::id().to_string());
        while let Some(line) = parent.hear_line() {
            let cmd = line.trim();
            if cmd == "exit" {
                break;
            }
            match shell.exec(cmd) {
                Ok(values) => parent.say("ok", &values.join(" ")),
                Err((code, message)) => parent.say("err", &format!("{code} {message}")),
            }
        }
        Ok(())
    });
}

type Reply = Result<Vec<String>, (i32, String)>;

struct Shell {
    api: AclApi,
}

/// Calls a required function of the table.
macro_rules! req {
    ($api:expr, $f:ident ( $($arg:expr),* )) => {{
        let f = $api.$f;
        // SAFETY: the shell passes arguments that follow the ACL contract (or are NULL,
        // which every emulated function checks); handles and pointers come from earlier
        // calls of this process.
        unsafe { f($($arg),*) }
    }};
}

/// Calls an optional function of the table (the emulator has them all).
macro_rules! opt {
    ($api:expr, $f:ident ( $($arg:expr),* )) => {{
        let f = $api.$f.expect(concat!(stringify!($f), " is present in the emulator"));
        // SAFETY: as for `req!`.
        unsafe { f($($arg),*) }
    }};
}

/// The value of an address the shell printed (`0x...`).
pub fn addr(text: &str) -> u64 {
    u64::from_str_radix(text.trim_start_matches("0x"), 16).unwrap()
}

/// An address or handle as the shell prints it.
fn hex(v: usize) -> String {
    format!("{v:#x}")
}

fn parse_num(tok: &str) -> Result<i128, (i32, String)> {
    let parsed = if let Some(h) = tok.strip_prefix("0x") {
        i128::from_str_radix(h, 16)
    } else {
        tok.parse()
    };
    parsed.map_err(|_| (-1, format!("shell: bad number {tok:?}")))
}

/// A 65-byte key buffer from its text (`null` gives NULL).
fn key_buf(tok: &str) -> Option<[c_char; 65]> {
    if tok == "null" {
        return None;
    }
    let mut buf = [0 as c_char; 65];
    for (slot, b) in buf.iter_mut().zip(tok.bytes().take(64)) {
        *slot = b as c_char;
    }
    Some(buf)
}

fn key_ptr(buf: &Option<[c_char; 65]>) -> *const c_char {
    buf.as_ref().map_or(ptr::null(), |b| b.as_ptr())
}

/// The text of a key buffer, up to its NUL.
pub fn key_text(buf: &[c_char]) -> String {
    let bytes: Vec<u8> = buf
        .iter()
        .take_while(|c| **c != 0)
        .map(|c| *c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

fn vptr(v: i128) -> *mut c_void {
    ptr::with_exposed_provenance_mut(v as usize)
}

impl Shell {
    fn status(&self, code: aclError, values: Vec<String>) -> Reply {
        if code == 0 {
            return Ok(values);
        }
        let p = req!(self.api, aclGetRecentErrMsg());
        let message = if p.is_null() {
            "<NULL>".to_owned()
        } else {
            // SAFETY: a non-NULL result is a NUL-terminated string valid until the next
            // aclGetRecentErrMsg on this thread.
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        };
        Err((code, message.replace('\n', " ")))
    }

    fn exec(&mut self, line: &str) -> Reply {
        let toks: Vec<&str> = line.split_whitespace().collect();
        let Some((&cmd, args)) = toks.split_first() else {
            return Err((-1, "shell: empty command".into()));
        };
        let n = |i: usize| -> Result<i128, (i32, String)> {
            args.get(i)
                .ok_or((-1, format!("shell: {cmd} needs argument {i}")))
                .and_then(|t| parse_num(t))
        };
        let n_or = |i: usize, default: i128| -> Result<i128, (i32, String)> {
            if i < args.len() { n(i) } else { Ok(default) }
        };
        let api = &self.api;
        match cmd {
            "init" => {
                let path = args.first().map(|p| std::ffi::CString::new(*p).unwrap());
                let code = req!(
                    api,
                    aclInit(path.as_ref().map_or(ptr::null(), |p| p.as_ptr()))
                );
                self.status(code, vec![])
            }
            "finalize" => self.status(req!(api, aclFinalize()), vec![]),
            "errmsg" => {
                let p = req!(api, aclGetRecentErrMsg());
                // SAFETY: as in `status`.
                let text = unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
                Ok(vec![format!("[{text}]")])
            }
            "set-device" => self.status(req!(api, aclrtSetDevice(n(0)? as i32)), vec![]),
            "reset-device" => self.status(req!(api, aclrtResetDevice(n(0)? as i32)), vec![]),
            "get-device" => {
                let mut d = -1;
                let code = req!(api, aclrtGetDevice(&mut d));
                self.status(code, vec![d.to_string()])
            }
            "thread-get-device" => {
                let f = api.aclrtGetDevice;
                let code = std::thread::spawn(move || {
                    let mut d = -1;
                    // SAFETY: `d` is writable.
                    unsafe { f(&mut d) }
                })
                .join()
                .unwrap();
                let reply = self.status(code, vec![]);
                // The message belongs to the other thread; this thread has none.
                reply.map_err(|(c, _)| (c, "(on another thread)".into()))
            }
            "device-count" => {
                let mut c = 0u32;
                let code = req!(api, aclrtGetDeviceCount(&mut c));
                self.status(code, vec![c.to_string()])
            }
            "malloc" => {
                let mut p = ptr::null_mut();
                let code = req!(api, aclrtMalloc(&mut p, n(0)? as usize, n_or(1, 0)? as i32));
                self.status(code, vec![hex(p.addr())])
            }
            "free" => self.status(req!(api, aclrtFree(vptr(n(0)?))), vec![]),
            "host-alloc" => {
                let buf: &'static mut [u8] = vec![0u8; n(0)? as usize].leak();
                Ok(vec![hex(buf.as_mut_ptr().expose_provenance())])
            }
            "write" => {
                // write <ptr> <seed> <len> [offset]: H2D copy of the pattern.
                let data = pattern(n(1)? as u8, n(2)? as usize);
                let dst = vptr(n(0)? + n_or(3, 0)?);
                let code = req!(
                    api,
                    aclrtMemcpy(
                        dst,
                        data.len(),
                        data.as_ptr().cast(),
                        data.len(),
                        ACL_MEMCPY_HOST_TO_DEVICE
                    )
                );
                self.status(code, vec![])
            }
            "check" => {
                // check <ptr> <seed> <len> [offset]: D2H copy, compared with the pattern.
                let want = pattern(n(1)? as u8, n(2)? as usize);
                let mut got = vec![0u8; want.len()];
                let src = vptr(n(0)? + n_or(3, 0)?);
                let code = req!(
                    api,
                    aclrtMemcpy(
                        got.as_mut_ptr().cast(),
                        got.len(),
                        src,
                        got.len(),
                        ACL_MEMCPY_DEVICE_TO_HOST
                    )
                );
                if code == 0 && got != want {
                    let at = got.iter().zip(&want).position(|(a, b)| a != b).unwrap_or(0);
                    return Err((-2, format!("bytes differ from the pattern at offset {at}")));
                }
                self.status(code, vec![])
            }
            "peek" => {
                // peek <ptr>: one byte read straight through the mapping, as a CPU-visible
                // pointer would (faults with SIGBUS once the pages are revoked).
                let p = n(0)? as usize as *const u8;
                // SAFETY: deliberately unchecked; tests pass pointers this process mapped.
                let b = unsafe { std::ptr::read_volatile(p) };
                self.status(0, vec![b.to_string()])
            }
            "check-byte" => {
                // check-byte <ptr> <len> <value>: D2H copy, every byte equal to value.
                let mut got = vec![0u8; n(1)? as usize];
                let value = n(2)?;
                let code = req!(
                    api,
                    aclrtMemcpy(
                        got.as_mut_ptr().cast(),
                        got.len(),
                        vptr(n(0)?),
                        got.len(),
                        ACL_MEMCPY_DEVICE_TO_HOST
                    )
                );
                if code == 0 && got.iter().any(|b| i128::from(*b) != value) {
                    return Err((-2, "bytes differ from the fill value".into()));
                }
                self.status(code, vec![])
            }
            "memcpy" => {
                // memcpy <dst> <destMax> <src> <count> <kind>
                let code = req!(
                    api,
                    aclrtMemcpy(
                        vptr(n(0)?),
                        n(1)? as usize,
                        vptr(n(2)?),
                        n(3)? as usize,
                        n(4)? as i32
                    )
                );
                self.status(code, vec![])
            }
            "memcpy-async" => {
                // memcpy-async <dst> <destMax> <src> <count> <kind> [stream]
                let code = opt!(
                    api,
                    aclrtMemcpyAsync(
                        vptr(n(0)?),
                        n(1)? as usize,
                        vptr(n(2)?),
                        n(3)? as usize,
                        n(4)? as i32,
                        vptr(n_or(5, 0)?)
                    )
                );
                self.status(code, vec![])
            }
            "memset" => {
                let code = req!(
                    api,
                    aclrtMemset(vptr(n(0)?), n(1)? as usize, n(2)? as i32, n(3)? as usize)
                );
                self.status(code, vec![])
            }
            "range" => {
                let (mut base, mut size) = (ptr::null_mut(), 0usize);
                let code = opt!(
                    api,
                    aclrtMemGetAddressRange(vptr(n(0)?), &mut base, &mut size)
                );
                self.status(code, vec![hex(base.addr()), size.to_string()])
            }
            "stream-create" => {
                let mut s = ptr::null_mut();
                let code = req!(api, aclrtCreateStream(&mut s));
                self.status(code, vec![hex(s.addr())])
            }
            "stream-destroy" => self.status(req!(api, aclrtDestroyStream(vptr(n(0)?))), vec![]),
            "stream-sync" => self.status(req!(api, aclrtSynchronizeStream(vptr(n(0)?))), vec![]),
            "granularity" => {
                // granularity <device> <option> [memAttr] [locationType]
                let mut prop = phys_prop(n(0)?, n_or(2, i128::from(ACL_MEM_HUGE))?, n_or(3, 1)?, 0);
                let mut g = 0usize;
                let code = opt!(
                    api,
                    aclrtMemGetAllocationGranularity(&mut prop, n(1)? as i32, &mut g)
                );
                self.status(code, vec![g.to_string()])
            }
            "malloc-physical" => {
                // malloc-physical <device> <size> [flags] [memAttr] [locationType] [handleType]
                let prop = phys_prop(
                    n(0)?,
                    n_or(3, i128::from(ACL_MEM_HUGE))?,
                    n_or(4, 1)?,
                    n_or(5, 0)?,
                );
                let mut h = ptr::null_mut();
                let code = req!(
                    api,
                    aclrtMallocPhysical(&mut h, n(1)? as usize, &prop, n_or(2, 0)? as u64)
                );
                self.status(code, vec![hex(h.addr())])
            }
            "free-physical" => self.status(req!(api, aclrtFreePhysical(vptr(n(0)?))), vec![]),
            "reserve" => {
                // reserve <size> [alignment] [expectPtr] [flags]
                let mut va = ptr::null_mut();
                let code = req!(
                    api,
                    aclrtReserveMemAddress(
                        &mut va,
                        n(0)? as usize,
                        n_or(1, 0)? as usize,
                        vptr(n_or(2, 0)?),
                        n_or(3, 0)? as u64
                    )
                );
                self.status(code, vec![hex(va.addr())])
            }
            "release-address" => {
                self.status(req!(api, aclrtReleaseMemAddress(vptr(n(0)?))), vec![])
            }
            "map" => {
                // map <va> <size> <handle> [offset] [flags]
                let code = req!(
                    api,
                    aclrtMapMem(
                        vptr(n(0)?),
                        n(1)? as usize,
                        n_or(3, 0)? as usize,
                        vptr(n(2)?),
                        n_or(4, 0)? as u64
                    )
                );
                self.status(code, vec![])
            }
            "unmap" => self.status(req!(api, aclrtUnmapMem(vptr(n(0)?))), vec![]),
            "set-access" => {
                // set-access <va> <size> <flags> <device> [locationType]
                let mut desc = aclrtMemAccessDesc {
                    flags: n(2)? as i32,
                    location: aclrtMemLocation {
                        id: n(3)? as u32,
                        r#type: n_or(4, 1)? as i32,
                    },
                    rsv: [0; 12],
                };
                let code = opt!(
                    api,
                    aclrtMemSetAccess(vptr(n(0)?), n(1)? as usize, &mut desc, 1)
                );
                self.status(code, vec![])
            }
            "export" => {
                // export <handle> [handleType] [flags]
                let mut sh = 0u64;
                let code = opt!(
                    api,
                    aclrtMemExportToShareableHandle(
                        vptr(n(0)?),
                        n_or(1, 0)? as i32,
                        n_or(2, 0)? as u64,
                        &mut sh
                    )
                );
                self.status(code, vec![sh.to_string()])
            }
            "set-pid" => {
                // set-pid <shareable> [pid...] (no pids: NULL, 0)
                let mut pids = pid_list(&args[1..])?;
                let (p, len) = pid_args(&mut pids);
                let code = opt!(api, aclrtMemSetPidToShareableHandle(n(0)? as u64, p, len));
                self.status(code, vec![])
            }
            "set-pid-zero" => {
                // set-pid-zero <shareable> <pid>: a valid array but pidNum 0.
                let mut pid = n(1)? as i32;
                let code = opt!(
                    api,
                    aclrtMemSetPidToShareableHandle(n(0)? as u64, &mut pid, 0)
                );
                self.status(code, vec![])
            }
            "import" => {
                let mut h = ptr::null_mut();
                let code = opt!(
                    api,
                    aclrtMemImportFromShareableHandle(n(0)? as u64, n(1)? as i32, &mut h)
                );
                self.status(code, vec![hex(h.addr())])
            }
            "key-export" => {
                // key-export <ptr> <size> [len] [flags]
                let mut key = [0 as c_char; 128];
                let len = n_or(2, 65)? as usize;
                let code = opt!(
                    api,
                    aclrtIpcMemGetExportKey(
                        vptr(n(0)?),
                        n(1)? as usize,
                        key.as_mut_ptr(),
                        len.min(128),
                        n_or(3, 0)? as u64
                    )
                );
                if code == 0 && key[64] != 0 {
                    return Err((-3, "the key is not NUL terminated within 65 bytes".into()));
                }
                self.status(code, vec![key_text(&key)])
            }
            "key-set-pid" => {
                // key-set-pid <key> [pid...]
                let key = key_buf(args.first().copied().unwrap_or("null"));
                let mut pids = pid_list(&args[1..])?;
                let (p, len) = pid_args(&mut pids);
                let code = opt!(api, aclrtIpcMemSetImportPid(key_ptr(&key), p, len));
                self.status(code, vec![])
            }
            "key-import" => {
                // key-import <key> [flags]
                let key = key_buf(args.first().copied().unwrap_or("null"));
                let mut p = ptr::null_mut();
                let code = opt!(
                    api,
                    aclrtIpcMemImportByKey(&mut p, key_ptr(&key), n_or(1, 0)? as u64)
                );
                self.status(code, vec![hex(p.addr())])
            }
            "key-close" => {
                let key = key_buf(args.first().copied().unwrap_or("null"));
                let code = opt!(api, aclrtIpcMemClose(key_ptr(&key)));
                self.status(code, vec![])
            }
            "bare-tgid" => {
                let mut pid = 0;
                let code = opt!(api, aclrtDeviceGetBareTgid(&mut pid));
                self.status(code, vec![pid.to_string()])
            }
            "can-access" => {
                let mut can = -1;
                let code = req!(
                    api,
                    aclrtDeviceCanAccessPeer(&mut can, n(0)? as i32, n(1)? as i32)
                );
                self.status(code, vec![can.to_string()])
            }
            "enable-peer" => {
                let code = req!(
                    api,
                    aclrtDeviceEnablePeerAccess(n(0)? as i32, n_or(1, 0)? as u32)
                );
                self.status(code, vec![])
            }
            "notify-create" => {
                let mut h = ptr::null_mut();
                let code = opt!(api, aclrtCreateNotify(&mut h, n_or(0, 0)? as u64));
                self.status(code, vec![hex(h.addr())])
            }
            "notify-destroy" => self.status(opt!(api, aclrtDestroyNotify(vptr(n(0)?))), vec![]),
            "notify-export" => {
                // notify-export <notify> [len] [flags]
                let mut key = [0 as c_char; 128];
                let len = n_or(1, 65)? as usize;
                let code = opt!(
                    api,
                    aclrtNotifyGetExportKey(
                        vptr(n(0)?),
                        key.as_mut_ptr(),
                        len.min(128),
                        n_or(2, 0)? as u64
                    )
                );
                self.status(code, vec![key_text(&key)])
            }
            "notify-set-pid" => {
                let mut pids = pid_list(&args[1..])?;
                let (p, len) = pid_args(&mut pids);
                let code = opt!(api, aclrtNotifySetImportPid(vptr(n(0)?), p, len));
                self.status(code, vec![])
            }
            "notify-import" => {
                let key = key_buf(args.first().copied().unwrap_or("null"));
                let mut h = ptr::null_mut();
                let code = opt!(
                    api,
                    aclrtNotifyImportByKey(&mut h, key_ptr(&key), n_or(1, 0)? as u64)
                );
                self.status(code, vec![hex(h.addr())])
            }
            "notify-record" => {
                let code = opt!(api, aclrtRecordNotify(vptr(n(0)?), vptr(n_or(1, 0)?)));
                self.status(code, vec![])
            }
            "notify-wait" => {
                // notify-wait <notify> <timeout s> [stream]: the wait (a stream task), then
                // aclrtSynchronizeStream of that stream, which reports its timeout; answers
                // the elapsed ms.
                let t0 = Instant::now();
                let stream = vptr(n_or(2, 0)?);
                let mut code = opt!(
                    api,
                    aclrtWaitAndResetNotify(vptr(n(0)?), stream, n(1)? as u32)
                );
                if code == 0 {
                    code = req!(api, aclrtSynchronizeStream(stream));
                }
                self.status(code, vec![t0.elapsed().as_millis().to_string()])
            }
            "notify-batch-reset" => {
                // notify-batch-reset <notify>...: aclrtNotifyBatchReset of the list.
                let mut handles = (0..args.len())
                    .map(|i| n(i).map(vptr))
                    .collect::<Result<Vec<_>, _>>()?;
                let code = opt!(
                    api,
                    aclrtNotifyBatchReset(handles.as_mut_ptr(), handles.len())
                );
                self.status(code, vec![])
            }
            "notify-wait-async" => {
                // notify-wait-async <notify> <timeout s> [stream]: only the call, which
                // enqueues the wait; answers the elapsed ms.
                let t0 = Instant::now();
                let code = opt!(
                    api,
                    aclrtWaitAndResetNotify(vptr(n(0)?), vptr(n_or(2, 0)?), n(1)? as u32)
                );
                self.status(code, vec![t0.elapsed().as_millis().to_string()])
            }
            "ping" | "pong" => {
                // ping <record> <wait> <rounds>: record, then wait, per round.
                // pong <wait> <record> <rounds>: wait, then record, per round.
                let (a, b, rounds) = (vptr(n(0)?), vptr(n(1)?), n(2)?);
                let t0 = Instant::now();
                for _ in 0..rounds {
                    // Each wait is a stream task: synchronise the default stream after it.
                    let wait = |n| match opt!(api, aclrtWaitAndResetNotify(n, ptr::null_mut(), 60))
                    {
                        0 => req!(api, aclrtSynchronizeStream(ptr::null_mut())),
                        c => c,
                    };
                    let code = if cmd == "ping" {
                        match opt!(api, aclrtRecordNotify(a, ptr::null_mut())) {
                            0 => wait(b),
                            c => c,
                        }
                    } else {
                        match wait(a) {
                            0 => opt!(api, aclrtRecordNotify(b, ptr::null_mut())),
                            c => c,
                        }
                    };
                    if code != 0 {
                        return self.status(code, vec![]);
                    }
                }
                Ok(vec![t0.elapsed().as_micros().to_string()])
            }
            "version" => {
                let (mut a, mut b, mut c) = (0, 0, 0);
                let code = opt!(api, aclrtGetVersion(&mut a, &mut b, &mut c));
                self.status(code, vec![a.to_string(), b.to_string(), c.to_string()])
            }
            "version-str" => {
                let mut name = std::ffi::CString::new(args.first().copied().unwrap_or(""))
                    .unwrap()
                    .into_bytes_with_nul();
                let mut out = [0 as c_char; 128];
                let code = opt!(
                    api,
                    aclsysGetVersionStr(name.as_mut_ptr().cast(), out.as_mut_ptr())
                );
                self.status(code, vec![key_text(&out)])
            }
            "race-import" => {
                // race-import <shareable> <device> <threads>: concurrent imports of one
                // shareable handle; answers the codes sorted, then frees the imports.
                let (sh, dev, threads) = (n(0)? as u64, n(1)? as i32, n(2)? as usize);
                let f = api.aclrtMemImportFromShareableHandle.expect("present");
                let free = api.aclrtFreePhysical;
                let barrier = std::sync::Arc::new(std::sync::Barrier::new(threads));
                let results: Vec<(i32, usize)> = (0..threads)
                    .map(|_| {
                        let barrier = barrier.clone();
                        std::thread::spawn(move || {
                            let mut h = ptr::null_mut();
                            barrier.wait();
                            // SAFETY: `h` is writable.
                            let code = unsafe { f(sh, dev, &mut h) };
                            (code, h.addr())
                        })
                    })
                    .collect::<Vec<_>>()
                    .into_iter()
                    .map(|t| t.join().unwrap())
                    .collect();
                for (code, h) in &results {
                    if *code == 0 {
                        // SAFETY: a handle this process just imported.
                        let freed = unsafe { free(ptr::without_provenance_mut(*h)) };
                        if freed != 0 {
                            return Err((freed, "freeing a raced import failed".into()));
                        }
                    }
                }
                let mut codes: Vec<String> = results.iter().map(|(c, _)| c.to_string()).collect();
                codes.sort();
                Ok(codes)
            }
            "race-key-import" => {
                // race-key-import <key> <threads>: concurrent imports of one key (each
                // thread sets device 0 first); answers the distinct addresses, then closes.
                let key = key_buf(args.first().copied().unwrap_or("null"));
                let threads = n(1)? as usize;
                let (set, import, close) = (
                    api.aclrtSetDevice,
                    api.aclrtIpcMemImportByKey.expect("present"),
                    api.aclrtIpcMemClose.expect("present"),
                );
                let barrier = std::sync::Arc::new(std::sync::Barrier::new(threads));
                let results: Vec<(i32, usize)> = (0..threads)
                    .map(|_| {
                        let (barrier, key) = (barrier.clone(), key);
                        std::thread::spawn(move || {
                            let mut p = ptr::null_mut();
                            // SAFETY: plain value argument.
                            unsafe { set(0) };
                            barrier.wait();
                            // SAFETY: `p` is writable and the key a 65-byte buffer.
                            let code = unsafe { import(&mut p, key_ptr(&key), 0) };
                            (code, p.addr())
                        })
                    })
                    .collect::<Vec<_>>()
                    .into_iter()
                    .map(|t| t.join().unwrap())
                    .collect();
                if let Some((code, _)) = results.iter().find(|(c, _)| *c != 0) {
                    return Err((*code, "a raced key import failed".into()));
                }
                let mut addrs: Vec<usize> = results.iter().map(|(_, a)| *a).collect();
                addrs.sort_unstable();
                addrs.dedup();
                for _ in 0..threads {
                    // SAFETY: the key buffer is valid; this thread has a device set.
                    let code = unsafe { close(key_ptr(&key)) };
                    if code != 0 {
                        return self.status(code, vec![]);
                    }
                }
                Ok(vec![addrs.len().to_string()])
            }
            "sync-device" => self.status(opt!(api, aclrtSynchronizeDevice()), vec![]),
            "sync-device-timeout" => self.status(
                opt!(api, aclrtSynchronizeDeviceWithTimeout(n(0)? as i32)),
                vec![],
            ),
            "mem-info" => {
                // mem-info <attr>: answers free and total.
                let (mut free, mut total) = (0usize, 0usize);
                let code = opt!(api, aclrtGetMemInfo(n(0)? as i32, &mut free, &mut total));
                self.status(code, vec![free.to_string(), total.to_string()])
            }
            "malloc-host" => {
                let mut p = ptr::null_mut();
                let code = opt!(api, aclrtMallocHost(&mut p, n(0)? as usize));
                self.status(code, vec![hex(p.addr())])
            }
            "free-host" => self.status(opt!(api, aclrtFreeHost(vptr(n(0)?))), vec![]),
            "stream-destroy-force" => {
                self.status(opt!(api, aclrtDestroyStreamForce(vptr(n(0)?))), vec![])
            }
            "reset-device-force" => {
                self.status(opt!(api, aclrtResetDeviceForce(n(0)? as i32)), vec![])
            }
            "event-create" => {
                let mut e = ptr::null_mut();
                let code = opt!(api, aclrtCreateEventExWithFlag(&mut e, n(0)? as u32));
                self.status(code, vec![hex(e.addr())])
            }
            "event-create-flag" => {
                // event-create-flag <flag>: aclrtCreateEventWithFlag.
                let mut e = ptr::null_mut();
                let code = opt!(api, aclrtCreateEventWithFlag(&mut e, n(0)? as u32));
                self.status(code, vec![hex(e.addr())])
            }
            "event-destroy" => self.status(opt!(api, aclrtDestroyEvent(vptr(n(0)?))), vec![]),
            "event-record" => self.status(
                opt!(api, aclrtRecordEvent(vptr(n(0)?), vptr(n_or(1, 0)?))),
                vec![],
            ),
            "event-wait" => {
                // event-wait <stream> <event>: aclrtStreamWaitEvent.
                let code = opt!(api, aclrtStreamWaitEvent(vptr(n(0)?), vptr(n(1)?)));
                self.status(code, vec![])
            }
            "event-sync" => self.status(opt!(api, aclrtSynchronizeEvent(vptr(n(0)?))), vec![]),
            "event-sync-timeout" => {
                let timeout = i32::try_from(n(1)?).map_err(|e| (-1, e.to_string()))?;
                let code = opt!(api, aclrtSynchronizeEventWithTimeout(vptr(n(0)?), timeout));
                self.status(code, vec![])
            }
            "event-query" => {
                let mut status = -1;
                let code = opt!(api, aclrtQueryEventStatus(vptr(n(0)?), &mut status));
                self.status(code, vec![status.to_string()])
            }
            "event-handle" => {
                // event-handle <event>: the 64 bytes as hex.
                let mut h = aclrtIpcEventHandle::default();
                let code = opt!(api, aclrtIpcGetEventHandle(vptr(n(0)?), &mut h));
                let text = crate::emu_support::hex(&h.reserved.map(|b| b as u8));
                self.status(code, vec![text])
            }
            "event-open" => {
                // event-open <hex of 64 bytes>
                let text = args.first().copied().unwrap_or("");
                let h = aclrtIpcEventHandle {
                    reserved: unhex64(text).map(|b| b as c_char),
                };
                let mut e = ptr::null_mut();
                let code = opt!(api, aclrtIpcOpenEventHandle(h, &mut e));
                self.status(code, vec![hex(e.addr())])
            }
            "null" => self.null_call(args.first().copied().unwrap_or("")),
            other if crate::acl_visibility::is_command(other) => {
                let (code, values) = crate::acl_visibility::exec(api, other, args)?;
                self.status(code, values)
            }
            other if crate::acl_batch::is_command(other) => {
                let (code, values) = crate::acl_batch::exec(api, other, args)?;
                self.status(code, values)
            }
            other => Err((-1, format!("shell: unknown command {other:?}"))),
        }
    }
}

fn phys_prop(
    device: i128,
    mem_attr: i128,
    location_type: i128,
    handle_type: i128,
) -> aclrtPhysicalMemProp {
    aclrtPhysicalMemProp {
        handleType: handle_type as i32,
        allocationType: ACL_MEM_ALLOCATION_TYPE_PINNED,
        memAttr: mem_attr as i32,
        location: aclrtMemLocation {
            id: device as u32,
            r#type: location_type as i32,
        },
        reserve: 0,
    }
}

fn pid_list(toks: &[&str]) -> Result<Vec<i32>, (i32, String)> {
    toks.iter()
        .map(|t| parse_num(t).map(|v| v as i32))
        .collect()
}

/// The (pointer, count) of a pid list: NULL and 0 when empty.
fn pid_args(pids: &mut [i32]) -> (*mut i32, usize) {
    if pids.is_empty() {
        (ptr::null_mut(), 0)
    } else {
        (pids.as_mut_ptr(), pids.len())
    }
}

// The NULL-pointer calls, apart to keep this file under 1,000 lines (after the macros,
// which they use).
mod null;
pub use null::NULL_CASES;
