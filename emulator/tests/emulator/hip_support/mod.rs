//! Harness shared by the `hip_*` integration tests: real child processes that run HIP
//! calls through the C ABI of the emulator's [`HipApi`] table.
//!
//! A test starts children with `devipc_testkit` (the test binary re-run on the
//! `child_role` test of the module that starts it). The child is a small command
//! interpreter: it reads one command per line on stdin (`malloc 4096`, `export 0x7f..`,
//! `open <hex> 1`, ...), makes the HIP calls through `devipc_emulator::hip_api()` and
//! answers `@@ r <hipError_t> <values...>` on stdout. `bg <tag> <command>` runs a command on a new thread and answers later with
//! `@@ bg-<tag> <hipError_t> <values...>`. Lines not starting with `@@ ` (the test
//! harness's own output) are ignored.
//!
//! Every test uses its own [`TestRoot`] (state directory `DEVIPC_EMU_DIR`), passes the HIP
//! version and the other `DEVIPC_EMU_*` variables explicitly (nothing is inherited from
//! the caller's environment), and asserts at the end that the directory holds nothing but
//! the ledger and that no device memory is accounted ([`EmuRoot::assert_clean`]).

use std::ffi::{CStr, c_int, c_uint, c_void};
use std::sync::OnceLock;
use std::time::Duration;

use devipc_emulator::handle::decode_handle64;
use devipc_emulator::state::{ObjectId, ObjectMeta, ProcessIdentity};
use devipc_hip_sys::{
    HipApi, hipCtx_t, hipEvent_t, hipIpcEventHandle_t, hipIpcMemHandle_t, hipMemcpyDeviceToHost,
    hipMemcpyHostToDevice, hipPointerAttribute_t, hipStream_t,
};
use devipc_testkit::{Child, Parent};

pub use crate::emu_support::{EmuRoot, pattern, unhex64};
use crate::emu_support::{child_entry, hex};
pub use devipc_testkit::TestRoot;

/// A child that outlives this kills itself, so a broken test never leaves processes.
const CHILD_WATCHDOG: Duration = Duration::from_secs(240);

/// The two runtime versions whose rules differ (`hipIpcMemLazyEnablePeerAccess` is 1 on
/// 6.x and 0 on 5.x).
pub const VERSIONS: [&str; 2] = ["6.2", "5.2"];

/// Whether the emulated `version` ("5.2", "6.0", ...) is at least `major.minor`.
pub fn at_least(version: &str, major: u32, minor: u32) -> bool {
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap());
    let v = (parts.next().unwrap(), parts.next().unwrap_or(0));
    v >= (major, minor)
}

/// ROCm 5.6's IPC checks (owner check on open; `hipErrorInvalidValue` for export and
/// close refusals); before: no owner check, codes 17 and 400 (see `hip::versions`).
pub fn clr_ipc_checks(version: &str) -> bool {
    at_least(version, 5, 6)
}

/// ROCm 6.0: `hipMemGetAddressRange` of an unknown pointer is `hipErrorNotFound`.
pub fn address_range_not_found(version: &str) -> bool {
    at_least(version, 6, 0)
}

/// ROCm 6.0: `hipPointerGetAttributes` numbering and unregistered-memory answer.
pub fn pointer_attributes_v6(version: &str) -> bool {
    at_least(version, 6, 0)
}

/// `hipIpcMemLazyEnablePeerAccess` of `version`.
pub fn lazy(version: &str) -> c_uint {
    if version.starts_with('5') { 0 } else { 1 }
}

// ---------------------------------------------------------------------------------------
// Parent side.

/// The HIP objects of a test root's state directory.
pub trait HipRoot {
    /// The object a 64-byte handle (hex) names.
    fn object(&self, handle_hex: &str) -> ObjectId;

    /// The metadata of the object a handle names.
    fn meta(&self, handle_hex: &str) -> ObjectMeta;
}

impl HipRoot for TestRoot {
    fn object(&self, handle_hex: &str) -> ObjectId {
        decode_handle64(&unhex64(handle_hex)).unwrap().id
    }

    fn meta(&self, handle_hex: &str) -> ObjectMeta {
        self.state()
            .registry()
            .get(self.object(handle_hex))
            .unwrap()
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

/// A child process running the HIP shell (the role is its name); killed and reaped on
/// drop. Answers of background commands that arrive while another answer is awaited are
/// kept for [`Hip::bg_result`].
pub struct Hip {
    child: Child,
}

impl Hip {
    /// Starts a shell on `root`'s state directory emulating HIP `version`, with extra
    /// `DEVIPC_EMU_*` variables (e.g. `DEVIPC_EMU_DEVICES`, `DEVIPC_EMU_BREAK_RULE`).
    /// The child runs the `child_role` test of the caller's module.
    #[track_caller]
    pub fn spawn(name: &str, root: &TestRoot, version: &str, env: &[(&str, &str)]) -> Hip {
        let mut child = Child::build(&child_entry(), name, root)
            .env_remove_prefix("DEVIPC_")
            // The vendors' visibility variables of the caller's environment would change
            // which devices the child sees (issue 16): a test sets them explicitly.
            .env_remove("ROCR_VISIBLE_DEVICES")
            .env_remove("HIP_VISIBLE_DEVICES")
            .env_remove("CUDA_VISIBLE_DEVICES")
            .env("DEVIPC_EMU_HIP_VERSION", version)
            .envs(env.iter().copied())
            .keep_other_messages()
            .spawn();
        child.expect("ready");
        Hip { child }
    }

    fn name(&self) -> &str {
        self.child.role()
    }

    pub fn pid(&self) -> i32 {
        self.child.pid() as i32
    }

    /// The child's identity as holders record it.
    pub fn identity(&self) -> ProcessIdentity {
        crate::emu_support::identity(&self.child)
    }

    /// Runs one command and returns the answer.
    pub fn run(&mut self, cmd: &str) -> Reply {
        self.child.send(cmd);
        Reply::parse(&self.child.expect("r"))
    }

    /// Runs one command that must return `code`; the failure message names the command
    /// and the child's last error.
    pub fn expect_code(&mut self, cmd: &str, code: i32) -> Reply {
        let r = self.run(cmd);
        if r.code != code {
            let why = self.run("lasterr").rest;
            panic!(
                "{}: `{cmd}` returned {} (expected {code}); last error: {why}",
                self.name(),
                r.code
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
            self.name(),
            text.rest
        );
        let last = self.run("lasterr").rest;
        assert!(
            last.contains(&format!("[rule {rule}]")),
            "{}: last error after `{cmd}` does not name {rule}: {last:?}",
            self.name()
        );
    }

    /// Starts `cmd` on a new thread of the child; [`Hip::bg_result`] collects its answer.
    pub fn bg(&mut self, tag: &str, cmd: &str) {
        self.ok(&format!("bg {tag} {cmd}"));
    }

    /// Waits for the answer of the background command `tag`.
    pub fn bg_result(&mut self, tag: &str) -> Reply {
        Reply::parse(&self.child.expect(&format!("bg-{tag}")))
    }

    /// Whether the background command `tag` has answered already (without waiting, after
    /// a round trip that flushes what the child printed before).
    pub fn bg_done(&mut self, tag: &str) -> bool {
        self.run("nop");
        self.child.has_kept(&format!("bg-{tag}"))
    }

    /// Ends the shell and checks it exited cleanly.
    pub fn exit(mut self) {
        self.child.send("exit");
        self.child.wait_success();
    }

    /// Sends `cmd`, which must kill the child, and returns how it ended.
    pub fn run_fatal(mut self, cmd: &str) -> std::process::ExitStatus {
        self.child.send(cmd);
        self.child.wait()
    }

    /// SIGKILL; returns once the child is dead and reaped.
    pub fn kill(self) {
        self.child.kill();
    }
}

/// Formats a pointer as the shell prints it.
pub fn hexptr(p: u64) -> String {
    format!("{p:#x}")
}

// ---------------------------------------------------------------------------------------
// Child side.

/// Entry point of child processes (the `child_role` test of each topic module); a no-op
/// in the parent run.
pub fn child_main() {
    devipc_testkit::run_child_within(CHILD_WATCHDOG, |_name, parent| {
        // End libtest's `test <module>::child_role ... ` line first.
        println!();
        parent.say("ready", "");
        while let Some(line) = parent.hear_line() {
            let cmd = line.trim();
            if cmd == "exit" {
                break;
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
            parent.say("r", &reply);
        }
        Ok(())
    });
}

/// Sends `@@ key value` to the parent (from any thread of the shell).
fn say(key: &str, value: &str) {
    Parent::default().say(key, value);
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
        "peek" => {
            // Host access straight through the mapping, as a kernel or a CPU-visible
            // pointer would: faults (SIGBUS) once the pages are revoked.
            let p = num(1) as usize as *const u8;
            // SAFETY: deliberately unchecked; the tests pass pointers this process mapped.
            let b = unsafe { std::ptr::read_volatile(p) };
            format!("0 {b}")
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
        // hipPointerGetAttributes: code type device devicePointer hostPointer isManaged flags.
        "attrs" => {
            let mut a = hipPointerAttribute_t::zeroed();
            let c = hip!(hipPointerGetAttributes(&mut a, ptr(arg(1))));
            format!(
                "{c} {} {} {:#x} {:#x} {} {:#x}",
                a.r#type,
                a.device,
                a.devicePointer as usize,
                a.hostPointer as usize,
                a.isManaged,
                a.allocationFlags
            )
        }
        "attrs_null" => format!(
            "{}",
            hip!(hipPointerGetAttributes(std::ptr::null_mut(), ptr(arg(1))))
        ),
        "hostmalloc" => {
            let mut p: *mut c_void = std::ptr::null_mut();
            let c = hip!(hipHostMalloc(&mut p, num(1) as usize, num(2) as c_uint));
            format!("{c} {:#x}", p as usize)
        }
        "hostmalloc_null" => format!(
            "{}",
            hip!(hipHostMalloc(std::ptr::null_mut(), num(1) as usize, 0))
        ),
        "hostfree" => format!("{}", hip!(hipHostFree(ptr(arg(1))))),
        // Plain process memory (never freed), for the host side of asynchronous copies.
        "hostbuf" => {
            let buf: &'static mut [u8] = Vec::leak(vec![0u8; num(1) as usize]);
            format!("0 {:#x}", buf.as_mut_ptr() as usize)
        }
        // Writes / compares a pattern through a host pointer directly (no HIP call).
        "hostwrite" => {
            let data = pattern(num(3) as u8, num(2) as usize);
            // SAFETY: the test passes a pointer from hostbuf or hipHostMalloc with at
            // least `len` bytes.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), ptr(arg(1)).cast(), data.len()) };
            "0".into()
        }
        "hostcheck" => {
            let want = pattern(num(3) as u8, num(2) as usize);
            let mut got = vec![0u8; want.len()];
            // SAFETY: as for hostwrite.
            unsafe {
                std::ptr::copy_nonoverlapping(ptr(arg(1)).cast(), got.as_mut_ptr(), got.len())
            };
            let verdict = match got.iter().zip(&want).position(|(a, b)| a != b) {
                None => "same".to_owned(),
                Some(i) => format!("differs@{i}"),
            };
            format!("0 {verdict}")
        }
        "memcpy_async" => format!(
            "{}",
            hip!(hipMemcpyAsync(
                ptr(arg(1)),
                ptr(arg(2)),
                num(3) as usize,
                int(4),
                ptr(arg(5)).cast()
            ))
        ),
        "event_create0" => {
            let mut e: hipEvent_t = std::ptr::null_mut();
            let c = hip!(hipEventCreate(&mut e));
            format!("{c} {:#x}", e as usize)
        }
        "event_create0_null" => format!("{}", hip!(hipEventCreate(std::ptr::null_mut()))),
        "elapsed" => {
            let mut ms = f32::NAN;
            let c = hip!(hipEventElapsedTime(
                &mut ms,
                ptr(arg(1)).cast(),
                ptr(arg(2)).cast()
            ));
            format!("{c} {ms}")
        }
        "elapsed_null" => format!(
            "{}",
            hip!(hipEventElapsedTime(
                std::ptr::null_mut(),
                ptr(arg(1)).cast(),
                ptr(arg(2)).cast()
            ))
        ),
        "sleep_ms" => {
            std::thread::sleep(Duration::from_millis(num(1)));
            "0".into()
        }
        "ctx_create" => {
            let mut ctx: hipCtx_t = std::ptr::null_mut();
            let c = hip!(hipCtxCreate(&mut ctx, num(1) as c_uint, int(2)));
            format!("{c} {:#x}", ctx as usize)
        }
        "ctx_create_null" => format!("{}", hip!(hipCtxCreate(std::ptr::null_mut(), 0, int(1)))),
        "procaddr_present" => format!(
            "0 {}",
            if api.hipGetProcAddress.is_some() {
                "yes"
            } else {
                "no"
            }
        ),
        // hipGetProcAddress through the C function itself (also where the table has no
        // such field): code status pointer. `-` passes a NULL symbol.
        "procaddr" => {
            let name = std::ffi::CString::new(arg(1)).unwrap();
            let symbol = if arg(1) == "-" {
                std::ptr::null()
            } else {
                name.as_ptr()
            };
            let mut pfn: *mut c_void = std::ptr::null_mut();
            let mut status = -1;
            // SAFETY: valid out-pointers and a NUL-terminated name (or NULL).
            let c = unsafe {
                devipc_emulator::hip::hipGetProcAddress(symbol, &mut pfn, 602, 0, &mut status)
            };
            format!("{c} {status} {:#x}", pfn as usize)
        }
        // Looks up hipRuntimeGetVersion with hipGetProcAddress and calls it.
        "procaddr_call_version" => {
            let mut pfn: *mut c_void = std::ptr::null_mut();
            // SAFETY: valid out-pointer and a NUL-terminated name.
            let c = unsafe {
                devipc_emulator::hip::hipGetProcAddress(
                    c"hipRuntimeGetVersion".as_ptr(),
                    &mut pfn,
                    602,
                    0,
                    std::ptr::null_mut(),
                )
            };
            if c != 0 || pfn.is_null() {
                return format!("{c} 0");
            }
            // SAFETY: hipGetProcAddress returned the emulator's hipRuntimeGetVersion, whose
            // prototype is `hipError_t (int*)`.
            let f: unsafe extern "C" fn(*mut c_int) -> i32 = unsafe { std::mem::transmute(pfn) };
            let mut v = 0;
            // SAFETY: a valid out-pointer.
            let r = unsafe { f(&mut v) };
            format!("{r} {v}")
        }
        other if crate::hip_vmm::is_command(other) => crate::hip_vmm::execute(&words),
        other if crate::hip_visibility::is_command(other) => crate::hip_visibility::execute(&words),
        other if crate::hip_device_queries::is_command(other) => {
            crate::hip_device_queries::execute(&words)
        }
        other if crate::hip_batch::is_command(other) => crate::hip_batch::execute(&words),
        other => {
            say("fail", &format!("unknown shell command {other:?}"));
            std::process::exit(2);
        }
    }
}
