//! Harness shared by the `hip_*` integration tests: real child processes that run HIP
//! calls through the C ABI of the emulator's [`HipApi`] table.
//!
//! A test starts children by re-running its own test binary on the `child_role` test with
//! `DEVIPC_EMU_TEST_ROLE=hip-shell` (the pattern of `cross_process.rs`). The child is a
//! small command interpreter: it reads one command per line on stdin (`malloc 4096`,
//! `export 0x7f..`, `open <hex> 1`, ...), makes the HIP calls through
//! `devipc_emulator::hip_api()` and answers `@@ r <hipError_t> <values...>` on stdout.
//! `bg <tag> <command>` runs a command on a new thread and answers later with
//! `@@ bg-<tag> <hipError_t> <values...>`. Lines not starting with `@@ ` (the test
//! harness's own output) are ignored.
//!
//! Every test uses its own temporary state directory (`DEVIPC_EMU_DIR`), passes the HIP
//! version and the other `DEVIPC_EMU_*` variables explicitly (nothing is inherited from
//! the caller's environment), and asserts at the end that the directory holds nothing but
//! the ledger and that no device memory is accounted.
#![allow(dead_code)] // each test binary uses part of the harness

use std::collections::VecDeque;
use std::ffi::{CStr, c_int, c_uint, c_void};
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{ChildStdin, ChildStdout, Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use devipc_emulator::handle::decode_handle64;
use devipc_emulator::state::{ObjectId, ObjectMeta, ProcessIdentity};
use devipc_emulator::{Config, State};
use devipc_hip_sys::{
    HipApi, hipEvent_t, hipIpcEventHandle_t, hipIpcMemHandle_t, hipMemcpyDeviceToHost,
    hipMemcpyHostToDevice, hipStream_t,
};

const ROLE_ENV: &str = "DEVIPC_EMU_TEST_ROLE";
const ROLE: &str = "hip-shell";
/// A child that outlives this kills itself, so a broken test never leaves processes.
const CHILD_WATCHDOG: Duration = Duration::from_secs(240);
/// Generous: waits that should succeed must not fail on a loaded 2-core machine.
pub const LONG: Duration = Duration::from_secs(60);

/// The two runtime versions whose rules differ (`hipIpcMemLazyEnablePeerAccess` is 1 on
/// 6.x and 0 on 5.x).
pub const VERSIONS: [&str; 2] = ["6.2", "5.2"];

/// `hipIpcMemLazyEnablePeerAccess` of `version`.
pub fn lazy(version: &str) -> c_uint {
    if version.starts_with('5') { 0 } else { 1 }
}

// ---------------------------------------------------------------------------------------
// Parent side.

/// A test's private root with the state directory `state/` inside; removed on drop.
pub struct TestRoot {
    pub root: PathBuf,
}

impl TestRoot {
    /// A fresh root; `name` is for humans, a counter keeps concurrent tests apart.
    pub fn new(name: &str) -> TestRoot {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let root =
            std::env::temp_dir().join(format!("devipc-emu-hip-{}-{n}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        TestRoot { root }
    }

    pub fn state_dir(&self) -> PathBuf {
        self.root.join("state")
    }

    /// The parent's view of the state directory (never through `State::global`).
    pub fn state(&self) -> State {
        State::open(Config::for_dir(self.state_dir())).unwrap()
    }

    /// The state directory holds only the ledger and no memory is accounted.
    pub fn assert_clean(&self) {
        let state = self.state();
        let mut names = state.dir().entry_names().unwrap();
        names.sort();
        assert_eq!(names, ["ledger"], "leftover files in the state directory");
        let used = state.registry().ledger_snapshot().unwrap().used;
        assert!(
            used.iter().all(|u| *u == 0),
            "memory still accounted: {used:?}"
        );
    }

    /// The object a 64-byte handle (hex) names.
    pub fn object(&self, handle_hex: &str) -> ObjectId {
        decode_handle64(&unhex64(handle_hex)).unwrap().id
    }

    /// The metadata of the object a handle names.
    pub fn meta(&self, handle_hex: &str) -> ObjectMeta {
        self.state()
            .registry()
            .get(self.object(handle_hex))
            .unwrap()
    }

    /// Bytes in use on `device` (whatever device count the children were given).
    pub fn used(&self, device: u32) -> u64 {
        self.state().registry().ledger_snapshot().unwrap().used[device as usize]
    }
}

impl Drop for TestRoot {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// One answer of the child: the `hipError_t` and the values after it.
#[derive(Debug, Clone)]
pub struct Reply {
    pub code: i32,
    pub vals: Vec<String>,
    /// Everything after the code, as one string (messages with spaces).
    pub rest: String,
}

impl Reply {
    fn parse(text: &str) -> Reply {
        let (code, rest) = text.split_once(' ').unwrap_or((text, ""));
        Reply {
            code: code
                .parse()
                .unwrap_or_else(|_| panic!("bad reply {text:?}")),
            vals: rest.split_whitespace().map(str::to_owned).collect(),
            rest: rest.to_owned(),
        }
    }

    /// Value `i` as an address or number (`0x..` or decimal).
    pub fn num(&self, i: usize) -> u64 {
        parse_num(&self.vals[i]).unwrap()
    }

    /// Value `i` as text.
    pub fn val(&self, i: usize) -> &str {
        &self.vals[i]
    }
}

/// A child process running the HIP shell; killed and reaped on drop.
pub struct Hip {
    name: String,
    proc: std::process::Child,
    out: BufReader<ChildStdout>,
    inp: ChildStdin,
    /// Protocol lines read while waiting for another key.
    pending: VecDeque<(String, String)>,
}

impl Hip {
    /// Starts a shell on `root`'s state directory emulating HIP `version`, with extra
    /// `DEVIPC_EMU_*` variables (e.g. `DEVIPC_EMU_DEVICES`, `DEVIPC_EMU_BREAK_RULE`).
    pub fn spawn(name: &str, root: &TestRoot, version: &str, env: &[(&str, &str)]) -> Hip {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args(["child_role", "--exact", "--nocapture", "--test-threads=1"]);
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("DEVIPC_") {
                cmd.env_remove(k);
            }
        }
        cmd.env(ROLE_ENV, ROLE)
            .env("DEVIPC_EMU_DIR", root.state_dir())
            .env("DEVIPC_EMU_HIP_VERSION", version)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut proc = cmd.spawn().unwrap();
        let out = BufReader::new(proc.stdout.take().unwrap());
        let inp = proc.stdin.take().unwrap();
        let mut hip = Hip {
            name: name.to_owned(),
            proc,
            out,
            inp,
            pending: VecDeque::new(),
        };
        hip.expect("ready");
        hip
    }

    pub fn pid(&self) -> i32 {
        self.proc.id() as i32
    }

    /// The child's identity as holders record it.
    pub fn identity(&self) -> ProcessIdentity {
        ProcessIdentity::of_pid(self.pid()).unwrap().unwrap()
    }

    fn send(&mut self, line: &str) {
        writeln!(self.inp, "{line}").unwrap();
        self.inp.flush().unwrap();
    }

    /// Reads protocol lines until one with `key`, keeping others for later.
    fn expect(&mut self, key: &str) -> String {
        if let Some(i) = self.pending.iter().position(|(k, _)| k == key) {
            return self.pending.remove(i).unwrap().1;
        }
        let mut line = String::new();
        loop {
            line.clear();
            let n = self.out.read_line(&mut line).unwrap();
            assert!(n > 0, "child {} exited before answering {key:?}", self.name);
            // libtest prints `test child_role ... ` without a newline before the child
            // runs, so a protocol message may follow other text on its line.
            let Some(at) = line.find("@@ ") else {
                continue;
            };
            let msg = line[at + 3..].trim_end();
            let (k, v) = msg.split_once(' ').unwrap_or((msg, ""));
            if k == "fail" {
                panic!("child {} failed: {v}", self.name);
            }
            if k == key {
                return v.to_owned();
            }
            self.pending.push_back((k.to_owned(), v.to_owned()));
        }
    }

    /// Runs one command and returns the answer.
    pub fn run(&mut self, cmd: &str) -> Reply {
        self.send(cmd);
        Reply::parse(&self.expect("r"))
    }

    /// Runs one command that must return `code`; the failure message names the command
    /// and the child's last error.
    pub fn expect_code(&mut self, cmd: &str, code: i32) -> Reply {
        let r = self.run(cmd);
        if r.code != code {
            let why = self.run("lasterr").rest;
            panic!(
                "{}: `{cmd}` returned {} (expected {code}); last error: {why}",
                self.name, r.code
            );
        }
        r
    }

    /// Runs one command that must succeed.
    pub fn ok(&mut self, cmd: &str) -> Reply {
        self.expect_code(cmd, 0)
    }

    /// Runs a command that must fail with `code` because of `rule`: checks the thread's
    /// last error and `hipGetErrorString` name the rule.
    pub fn expect_rule(&mut self, cmd: &str, code: i32, rule: &str) {
        self.expect_code(cmd, code);
        let text = self.run(&format!("errstring_now {cmd}"));
        assert_eq!(text.code, code, "{cmd}: second run differs");
        assert!(
            text.rest.contains(&format!("[rule {rule}]")),
            "{}: hipGetErrorString after `{cmd}` does not name {rule}: {:?}",
            self.name,
            text.rest
        );
        let last = self.run("lasterr").rest;
        assert!(
            last.contains(&format!("[rule {rule}]")),
            "{}: last error after `{cmd}` does not name {rule}: {last:?}",
            self.name
        );
    }

    /// Starts `cmd` on a new thread of the child; [`Hip::bg_result`] collects its answer.
    pub fn bg(&mut self, tag: &str, cmd: &str) {
        self.ok(&format!("bg {tag} {cmd}"));
    }

    /// Waits for the answer of the background command `tag`.
    pub fn bg_result(&mut self, tag: &str) -> Reply {
        Reply::parse(&self.expect(&format!("bg-{tag}")))
    }

    /// Whether the background command `tag` has answered already (without waiting, after
    /// a round trip that flushes what the child printed before).
    pub fn bg_done(&mut self, tag: &str) -> bool {
        self.run("nop");
        let key = format!("bg-{tag}");
        self.pending.iter().any(|(k, _)| *k == key)
    }

    /// Ends the shell and checks it exited cleanly.
    pub fn exit(mut self) {
        self.send("exit");
        let status = self.proc.wait().unwrap();
        assert!(status.success(), "child {} exited with {status}", self.name);
    }

    /// SIGKILL; returns once the child is dead and reaped.
    pub fn kill(mut self) {
        self.proc.kill().unwrap();
        self.proc.wait().unwrap();
    }
}

impl Drop for Hip {
    fn drop(&mut self) {
        if let Ok(None) = self.proc.try_wait() {
            let _ = self.proc.kill();
            let _ = self.proc.wait();
        }
    }
}

/// Formats a pointer as the shell prints it.
pub fn hexptr(p: u64) -> String {
    format!("{p:#x}")
}

// ---------------------------------------------------------------------------------------
// Child side.

/// Entry point of child processes (the `child_role` test of each binary); a no-op in the
/// parent run.
pub fn child_main() {
    if std::env::var(ROLE_ENV).as_deref() != Ok(ROLE) {
        return;
    }
    std::thread::spawn(|| {
        std::thread::sleep(CHILD_WATCHDOG);
        eprintln!("hip shell watchdog: giving up");
        std::process::exit(97);
    });
    // End libtest's `test child_role ... ` line first.
    println!();
    say("ready", "");
    let stdin = std::io::stdin();
    let mut line = String::new();
    loop {
        line.clear();
        if stdin.lock().read_line(&mut line).unwrap_or(0) == 0 {
            std::process::exit(0);
        }
        let cmd = line.trim();
        if cmd == "exit" {
            std::process::exit(0);
        }
        let reply = match cmd.split_once(' ') {
            Some(("bg", rest)) => {
                let (tag, bg_cmd) = rest.split_once(' ').unwrap_or((rest, ""));
                let (tag, bg_cmd) = (tag.to_owned(), bg_cmd.to_owned());
                std::thread::spawn(move || say(&format!("bg-{tag}"), &execute(&bg_cmd)));
                "0 started".to_owned()
            }
            _ => execute(cmd),
        };
        say("r", &reply);
    }
}

fn say(key: &str, value: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "@@ {key} {value}");
    let _ = out.flush();
}

fn api() -> &'static HipApi {
    static API: OnceLock<HipApi> = OnceLock::new();
    API.get_or_init(devipc_emulator::hip_api)
}

pub fn parse_num(text: &str) -> Option<u64> {
    match text.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => text
            .parse::<u64>()
            .ok()
            .or_else(|| text.parse::<i64>().ok().map(|v| v as u64)),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Parses 128 hex digits (or anything else, padded/truncated, for garbage handles).
pub fn unhex64(text: &str) -> [u8; 64] {
    let mut out = [0u8; 64];
    for (i, slot) in out.iter_mut().enumerate() {
        *slot = text
            .get(2 * i..2 * i + 2)
            .and_then(|h| u8::from_str_radix(h, 16).ok())
            .unwrap_or(0);
    }
    out
}

/// The byte pattern both sides of a transfer agree on.
pub fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed ^ (i >> 8) as u8)
        .collect()
}

fn ptr(text: &str) -> *mut c_void {
    parse_num(text).unwrap_or(0) as usize as *mut c_void
}

fn c_str(p: *const std::ffi::c_char) -> String {
    if p.is_null() {
        return "(null)".into();
    }
    // SAFETY: the emulator returns NUL-terminated strings that live as long as the process.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// Runs one shell command; returns `<code> <values...>`.
fn execute(cmd: &str) -> String {
    let words: Vec<&str> = cmd.split_whitespace().collect();
    let arg = |i: usize| words.get(i).copied().unwrap_or("0");
    let num = |i: usize| parse_num(arg(i)).unwrap_or(0);
    let int = |i: usize| num(i) as i64 as c_int;
    let api = api();
    macro_rules! hip {
        ($f:ident($($a:expr),*)) => {
            // SAFETY: the shell passes pointers to live locals or values the emulator
            // handed out (or deliberately bad ones, which the emulator must reject).
            unsafe { (api.$f)($($a),*) }
        };
    }
    match words.first().copied().unwrap_or("") {
        "nop" => "0".into(),
        "init" => format!("{}", hip!(hipInit(num(1) as c_uint))),
        "version" => {
            let (mut rt, mut drv) = (0, 0);
            let a = hip!(hipRuntimeGetVersion(&mut rt));
            let b = hip!(hipDriverGetVersion(&mut drv));
            format!("{a} {rt} {b} {drv}")
        }
        "version_null" => format!("{}", hip!(hipRuntimeGetVersion(std::ptr::null_mut()))),
        "count" => {
            let mut n = -1;
            let c = hip!(hipGetDeviceCount(&mut n));
            format!("{c} {n}")
        }
        "setdev" => format!("{}", hip!(hipSetDevice(int(1)))),
        "getdev" => {
            let mut d = -1;
            let c = hip!(hipGetDevice(&mut d));
            format!("{c} {d}")
        }
        "getdev_thread" => std::thread::spawn(|| execute("getdev")).join().unwrap(),
        "devsync" => format!("{}", hip!(hipDeviceSynchronize())),
        "malloc" => {
            let mut p: *mut c_void = std::ptr::null_mut();
            let c = hip!(hipMalloc(&mut p, num(1) as usize));
            format!("{c} {:#x}", p as usize)
        }
        "malloc_null" => format!("{}", hip!(hipMalloc(std::ptr::null_mut(), num(1) as usize))),
        "free" => format!("{}", hip!(hipFree(ptr(arg(1))))),
        "fill" => {
            let data = pattern(num(3) as u8, num(2) as usize);
            let kind = words.get(4).map_or(hipMemcpyHostToDevice, |_| int(4));
            let c = hip!(hipMemcpy(
                ptr(arg(1)),
                data.as_ptr().cast(),
                data.len(),
                kind
            ));
            format!("{c}")
        }
        "check" => {
            let len = num(2) as usize;
            let want = pattern(num(3) as u8, len);
            let mut got = vec![0u8; len];
            let kind = words.get(4).map_or(hipMemcpyDeviceToHost, |_| int(4));
            let c = hip!(hipMemcpy(got.as_mut_ptr().cast(), ptr(arg(1)), len, kind));
            let verdict = match got.iter().zip(&want).position(|(a, b)| a != b) {
                None => "same".to_owned(),
                Some(i) => format!("differs@{i}"),
            };
            format!("{c} {verdict}")
        }
        "readbyte" => {
            let mut b = [0u8; 1];
            let c = hip!(hipMemcpy(
                b.as_mut_ptr().cast(),
                ptr(arg(1)),
                1,
                hipMemcpyDeviceToHost
            ));
            format!("{c} {}", b[0])
        }
        "memcpy" => format!(
            "{}",
            hip!(hipMemcpy(ptr(arg(1)), ptr(arg(2)), num(3) as usize, int(4)))
        ),
        "memset" => format!("{}", hip!(hipMemset(ptr(arg(1)), int(2), num(3) as usize))),
        "range" => {
            let mut base: *mut c_void = std::ptr::null_mut();
            let mut size = 0usize;
            let c = hip!(hipMemGetAddressRange(&mut base, &mut size, ptr(arg(1))));
            format!("{c} {:#x} {size}", base as usize)
        }
        "range_null" => {
            let mut size = 0usize;
            let c = hip!(hipMemGetAddressRange(
                std::ptr::null_mut(),
                &mut size,
                ptr(arg(1))
            ));
            format!("{c}")
        }
        "export" => {
            let mut h = hipIpcMemHandle_t::zeroed();
            let c = hip!(hipIpcGetMemHandle(&mut h, ptr(arg(1))));
            format!("{c} {}", hex(&h.to_bytes()))
        }
        "export_null" => format!(
            "{}",
            hip!(hipIpcGetMemHandle(std::ptr::null_mut(), ptr(arg(1))))
        ),
        "open" => {
            let mut p: *mut c_void = std::ptr::null_mut();
            let h = hipIpcMemHandle_t::from_bytes(unhex64(arg(1)));
            let c = hip!(hipIpcOpenMemHandle(&mut p, h, num(2) as c_uint));
            format!("{c} {:#x}", p as usize)
        }
        "open_null" => {
            let h = hipIpcMemHandle_t::from_bytes(unhex64(arg(1)));
            format!(
                "{}",
                hip!(hipIpcOpenMemHandle(
                    std::ptr::null_mut(),
                    h,
                    num(2) as c_uint
                ))
            )
        }
        "close" => format!("{}", hip!(hipIpcCloseMemHandle(ptr(arg(1))))),
        "stream_create" => {
            let mut s: hipStream_t = std::ptr::null_mut();
            let c = hip!(hipStreamCreate(&mut s));
            format!("{c} {:#x}", s as usize)
        }
        "stream_create_null" => format!("{}", hip!(hipStreamCreate(std::ptr::null_mut()))),
        "stream_destroy" => format!("{}", hip!(hipStreamDestroy(ptr(arg(1)).cast()))),
        "stream_sync" => format!("{}", hip!(hipStreamSynchronize(ptr(arg(1)).cast()))),
        "hold" => format!("{}", devipc_emulator::hip::hold_stream(ptr(arg(1)).cast())),
        "release" => format!(
            "{}",
            devipc_emulator::hip::release_stream(ptr(arg(1)).cast())
        ),
        "event_create" => {
            let mut e: hipEvent_t = std::ptr::null_mut();
            let c = hip!(hipEventCreateWithFlags(&mut e, num(1) as c_uint));
            format!("{c} {:#x}", e as usize)
        }
        "event_create_null" => format!(
            "{}",
            hip!(hipEventCreateWithFlags(
                std::ptr::null_mut(),
                num(1) as c_uint
            ))
        ),
        "event_destroy" => format!("{}", hip!(hipEventDestroy(ptr(arg(1)).cast()))),
        "record" => format!(
            "{}",
            hip!(hipEventRecord(ptr(arg(1)).cast(), ptr(arg(2)).cast()))
        ),
        "query" => format!("{}", hip!(hipEventQuery(ptr(arg(1)).cast()))),
        "event_sync" => format!("{}", hip!(hipEventSynchronize(ptr(arg(1)).cast()))),
        "wait_event" => format!(
            "{}",
            hip!(hipStreamWaitEvent(
                ptr(arg(1)).cast(),
                ptr(arg(2)).cast(),
                num(3) as c_uint
            ))
        ),
        "event_export" => {
            let mut h = hipIpcEventHandle_t::zeroed();
            let c = hip!(hipIpcGetEventHandle(&mut h, ptr(arg(1)).cast()));
            format!("{c} {}", hex(&h.to_bytes()))
        }
        "event_export_null" => format!(
            "{}",
            hip!(hipIpcGetEventHandle(
                std::ptr::null_mut(),
                ptr(arg(1)).cast()
            ))
        ),
        "event_open" => {
            let mut e: hipEvent_t = std::ptr::null_mut();
            let h = hipIpcEventHandle_t::from_bytes(unhex64(arg(1)));
            let c = hip!(hipIpcOpenEventHandle(&mut e, h));
            format!("{c} {:#x}", e as usize)
        }
        "event_open_null" => {
            let h = hipIpcEventHandle_t::from_bytes(unhex64(arg(1)));
            format!("{}", hip!(hipIpcOpenEventHandle(std::ptr::null_mut(), h)))
        }
        "can_peer" => {
            let mut v = -1;
            let c = hip!(hipDeviceCanAccessPeer(&mut v, int(1), int(2)));
            format!("{c} {v}")
        }
        "can_peer_null" => format!(
            "{}",
            hip!(hipDeviceCanAccessPeer(std::ptr::null_mut(), int(1), int(2)))
        ),
        "enable_peer" => format!(
            "{}",
            hip!(hipDeviceEnablePeerAccess(int(1), num(2) as c_uint))
        ),
        "errname" => format!("0 {}", c_str(hip!(hipGetErrorName(int(1))))),
        "errstring" => format!("0 {}", c_str(hip!(hipGetErrorString(int(1))))),
        // Runs a command, then immediately hipGetErrorString(its code) on this thread.
        "errstring_now" => {
            let rest = cmd.split_once(' ').map_or("", |(_, r)| r);
            let reply = execute(rest);
            let code: c_int = reply.split(' ').next().unwrap_or("0").parse().unwrap_or(0);
            format!("{code} {}", c_str(hip!(hipGetErrorString(code))))
        }
        "lasterr" => format!("0 {}", devipc_emulator::hip::last_error_message()),
        other => {
            say("fail", &format!("unknown shell command {other:?}"));
            std::process::exit(2);
        }
    }
}
