//! Command shells: one vendor or devipc call per text line, run here or in a peer.
//!
//! A scenario drives every process of a cross-process rule through the same interface,
//! [`Exec`]: a command line such as `vmm.import 1234 0` goes either to this process's
//! shell (a [`Local`] executor calls the handler directly) or over a pipe to a peer
//! process that runs the same handler ([`Remote`], peers started with
//! [`Remote::spawn`]). A reply is a list of words or a [`Failure`]. So one scenario
//! function reads top to bottom, whichever process each step runs in, and both sides
//! make exactly the same calls.
//!
//! The vendor shells are [`acl`] and [`hip`], the devipc facade shell [`facade`].

pub mod acl;
pub mod facade;
pub mod hip;

use std::ffi::OsString;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use devipc_child::{Child, hear, say};

use crate::process;

/// Why a command failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// A vendor call returned an error code.
    Vendor {
        /// The vendor function.
        api: String,
        /// Its status code.
        code: i32,
        /// The runtime's message (`aclGetRecentErrMsg`, `hipGetErrorString`).
        message: String,
    },
    /// A devipc call returned an error (facade shells).
    Devipc {
        /// The `devipc::Error` variant, e.g. `Timeout`.
        kind: String,
        /// Its message.
        message: String,
    },
    /// The harness: a peer hung, crashed or answered nonsense, or a command was malformed.
    Harness(String),
}

impl Failure {
    /// A harness failure.
    pub fn harness(what: impl Into<String>) -> Failure {
        Failure::Harness(what.into())
    }

    /// The vendor code, when this is a vendor failure.
    pub fn code(&self) -> Option<i32> {
        match self {
            Failure::Vendor { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// One-line wire form: `vendor <api> <code> <message>`, `devipc <kind> <message>` or
    /// `harness <message>`.
    fn to_wire(&self) -> String {
        match self {
            Failure::Vendor { api, code, message } => format!("vendor {api} {code} {message}"),
            Failure::Devipc { kind, message } => format!("devipc {kind} {message}"),
            Failure::Harness(m) => format!("harness {m}"),
        }
    }

    /// Inverse of [`Failure::to_wire`].
    fn from_wire(wire: &str) -> Failure {
        let mut parts = wire.splitn(2, ' ');
        let class = parts.next().unwrap_or("");
        let rest = parts.next().unwrap_or("");
        match class {
            "vendor" => {
                let mut p = rest.splitn(3, ' ');
                let api = p.next().unwrap_or("?").to_owned();
                match p.next().and_then(|c| c.parse().ok()) {
                    Some(code) => Failure::Vendor {
                        api,
                        code,
                        message: p.next().unwrap_or("").to_owned(),
                    },
                    None => Failure::harness(format!("malformed vendor failure: {wire}")),
                }
            }
            "devipc" => {
                let (kind, message) = rest.split_once(' ').unwrap_or((rest, ""));
                Failure::Devipc {
                    kind: kind.to_owned(),
                    message: message.to_owned(),
                }
            }
            _ => Failure::harness(rest.to_owned()),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Vendor { api, code, message } if message.is_empty() => {
                write!(f, "{api} returned {code}")
            }
            Failure::Vendor { api, code, message } => {
                write!(f, "{api} returned {code}: {message}")
            }
            Failure::Devipc { kind, message } => write!(f, "devipc error {kind}: {message}"),
            Failure::Harness(m) => write!(f, "harness: {m}"),
        }
    }
}

impl From<Failure> for crate::rule::Stop {
    fn from(f: Failure) -> Self {
        crate::rule::Stop::Fail(f.to_string())
    }
}

/// A command reply: the words after `ok`.
pub type Reply = Result<Vec<String>, Failure>;

/// Runs one command line.
pub trait Exec {
    /// Runs `line` and returns its reply.
    fn exec(&mut self, line: &str) -> Reply;
    /// Who runs it, for messages (`local` or the peer's name).
    fn who(&self) -> String;
}

/// A shell's command handler.
pub trait Handler {
    /// Runs one command (`name` and its arguments).
    fn handle(&mut self, name: &str, args: &[&str]) -> Reply;
}

/// The client calls both vendor shells answer with the same command lines: device memory
/// by address. [`acl::Acl`] and [`hip::Hip`] implement it, each on top of its own calls.
pub trait VendorClient {
    /// Runs one command line in the shell this client drives.
    fn run(&mut self, line: String) -> Reply;

    /// `aclrtMalloc` / `hipMalloc` of `size` bytes: the address.
    fn malloc(&mut self, size: usize) -> Result<u64, Failure> {
        word(&self.run(format!("malloc {size}"))?, 0)
    }

    /// `aclrtFree` / `hipFree`.
    fn free(&mut self, ptr: u64) -> Result<(), Failure> {
        self.run(format!("free {ptr}")).map(drop)
    }

    /// `aclrtMemcpy` / `hipMemcpy` host to device.
    fn write(&mut self, dst: u64, bytes: &[u8]) -> Result<(), Failure> {
        self.run(format!("write {dst} {}", hex(bytes))).map(drop)
    }

    /// `aclrtMemcpy` / `hipMemcpy` device to host.
    fn read(&mut self, src: u64, len: usize) -> Result<Vec<u8>, Failure> {
        unhex(&word::<String>(&self.run(format!("read {src} {len}"))?, 0)?)
    }

    /// `aclrtMemGetAddressRange` / `hipMemGetAddressRange`: (base, size).
    fn address_range(&mut self, ptr: u64) -> Result<(u64, usize), Failure> {
        let r = self.run(format!("address-range {ptr}"))?;
        Ok((word(&r, 0)?, word(&r, 1)?))
    }
}

/// Runs commands in this process.
#[derive(Debug)]
pub struct Local<H>(pub H);

impl<H: Handler> Exec for Local<H> {
    fn exec(&mut self, line: &str) -> Reply {
        run_line(&mut self.0, line)
    }

    fn who(&self) -> String {
        "local".into()
    }
}

fn run_line<H: Handler>(handler: &mut H, line: &str) -> Reply {
    let words: Vec<&str> = line.split_whitespace().collect();
    let Some((name, args)) = words.split_first() else {
        return Err(Failure::harness("empty command"));
    };
    if *name == "sleep" {
        // Common to every shell: lets a scenario queue "sleep, then act" in a peer to
        // show that a wait in another process blocks until the act.
        std::thread::sleep(Duration::from_millis(arg(args, 0)?));
        return Ok(Vec::new());
    }
    handler.handle(name, args)
}

/// A peer process running a shell; killed on drop.
#[derive(Debug)]
pub struct Remote {
    proc: Child,
    reply_timeout: Duration,
}

impl Remote {
    /// Starts a peer in `role` (e.g. `acl-shell`) for `target`, with `env` on top of this
    /// process's environment, and waits until its shell is ready.
    pub fn spawn(
        name: &str,
        role: &str,
        target: &str,
        env: &[(String, OsString)],
        reply_timeout: Duration,
    ) -> Result<Remote, Failure> {
        let proc =
            process::spawn(name, &[role, target, name], env, false).map_err(Failure::Harness)?;
        let mut remote = Remote {
            proc,
            reply_timeout,
        };
        match remote.proc.next(reply_timeout) {
            Ok((k, _)) if k == "ready" => Ok(remote),
            Ok((k, v)) if k == "fatal" => Err(Failure::harness(
                remote
                    .proc
                    .explain(&format!("peer `{name}` could not start: {v}")),
            )),
            Ok((k, v)) => Err(Failure::harness(format!(
                "peer `{name}` said `{k} {v}` instead of ready"
            ))),
            Err(e) => {
                let what = e.describe(name, "ready");
                Err(Failure::harness(remote.proc.explain(&what)))
            }
        }
    }

    /// The peer's pid.
    pub fn pid(&self) -> u32 {
        self.proc.pid()
    }

    /// Sends a command without waiting for its reply (for calls that block until another
    /// process acts); collect the reply with [`Remote::reply`].
    pub fn send(&mut self, line: &str) -> Result<(), Failure> {
        self.proc.send(line).map_err(|e| {
            let what = e.describe(self.proc.name(), line);
            Failure::harness(self.proc.explain(&what))
        })
    }

    /// The reply to the command sent last.
    pub fn reply(&mut self) -> Reply {
        self.reply_within(self.reply_timeout)
    }

    /// The reply to the command sent last, if it comes within `limit` (never later than the
    /// reply timeout); a harness failure otherwise.
    pub fn reply_within(&mut self, limit: Duration) -> Reply {
        match self.proc.next(limit.min(self.reply_timeout)) {
            Ok((k, v)) if k == "ok" => Ok(v.split_whitespace().map(str::to_owned).collect()),
            Ok((k, v)) if k == "err" => Err(Failure::from_wire(&v)),
            Ok((k, v)) => Err(Failure::harness(format!(
                "peer `{}` answered `{k} {v}`",
                self.proc.name()
            ))),
            Err(e) => {
                let what = e.describe(self.proc.name(), "a reply");
                Err(Failure::harness(self.proc.explain(&what)))
            }
        }
    }

    /// Ends the shell and checks that the peer exited cleanly.
    pub fn finish(mut self) -> Result<(), Failure> {
        let _ = self.proc.send("exit");
        let name = self.proc.name().to_owned();
        self.proc
            .finish(self.reply_timeout)
            .map_err(|how| Failure::harness(self.proc.explain(&format!("peer `{name}` {how}"))))
    }
}

impl Exec for Remote {
    fn exec(&mut self, line: &str) -> Reply {
        self.send(line)?;
        self.reply()
    }

    fn who(&self) -> String {
        format!("peer `{}`", self.proc.name())
    }
}

/// The peer's side: announces `ready` and answers one command per line until `exit` or
/// the end of input. `start` builds the handler; its error is reported as `fatal`.
pub fn serve<H: Handler>(start: impl FnOnce() -> Result<H, String>) -> Result<(), String> {
    let mut handler = match start() {
        Ok(h) => h,
        Err(e) => {
            say("fatal", &e);
            return Err(e);
        }
    };
    say("ready", "");
    while let Some(line) = hear() {
        if line.trim() == "exit" {
            break;
        }
        match run_line(&mut handler, &line) {
            Ok(words) => say("ok", &words.join(" ")),
            Err(f) => say("err", &f.to_wire()),
        }
    }
    drop(handler);
    Ok(())
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Inverse of [`hex`].
pub fn unhex(text: &str) -> Result<Vec<u8>, Failure> {
    if text.len() % 2 != 0 {
        return Err(Failure::harness(format!("odd-length hex `{text}`")));
    }
    (0..text.len())
        .step_by(2)
        .map(|i| {
            u8::from_str_radix(&text[i..i + 2], 16)
                .map_err(|_| Failure::harness(format!("bad hex `{text}`")))
        })
        .collect()
}

/// Argument `i` of a command, parsed.
pub fn arg<T: FromStr>(args: &[&str], i: usize) -> Result<T, Failure> {
    let raw = args
        .get(i)
        .ok_or_else(|| Failure::harness(format!("missing argument {i}")))?;
    raw.parse()
        .map_err(|_| Failure::harness(format!("bad argument {i}: `{raw}`")))
}

/// Word `i` of a reply, parsed.
pub fn word<T: FromStr>(reply: &[String], i: usize) -> Result<T, Failure> {
    let raw = reply
        .get(i)
        .ok_or_else(|| Failure::harness(format!("reply lacks word {i}: {reply:?}")))?;
    raw.parse()
        .map_err(|_| Failure::harness(format!("bad reply word {i}: `{raw}`")))
}

/// A pid list argument: `-` is an empty (non-NULL) list, `null` a NULL pointer, else
/// comma-separated pids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pids {
    /// A NULL pointer (with a count of 1).
    Null,
    /// These pids (possibly none).
    List(Vec<i32>),
}

impl Pids {
    /// The wire form.
    pub fn wire(&self) -> String {
        match self {
            Pids::Null => "null".into(),
            Pids::List(l) if l.is_empty() => "-".into(),
            Pids::List(l) => l.iter().map(i32::to_string).collect::<Vec<_>>().join(","),
        }
    }

    /// Parses the wire form.
    pub fn parse(text: &str) -> Result<Pids, Failure> {
        match text {
            "null" => Ok(Pids::Null),
            "-" => Ok(Pids::List(Vec::new())),
            _ => text
                .split(',')
                .map(|p| {
                    p.parse()
                        .map_err(|_| Failure::harness(format!("bad pid `{p}`")))
                })
                .collect::<Result<_, _>>()
                .map(Pids::List),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_round_trip_their_wire_form() {
        for f in [
            Failure::Vendor {
                api: "hipIpcOpenMemHandle".into(),
                code: 201,
                message: "opened in the exporter [rule x]".into(),
            },
            Failure::Vendor {
                api: "aclInit".into(),
                code: -1,
                message: String::new(),
            },
            Failure::Devipc {
                kind: "Timeout".into(),
                message: "wait timed out".into(),
            },
            Failure::harness("peer hung"),
        ] {
            assert_eq!(Failure::from_wire(&f.to_wire()), f);
        }
    }

    #[test]
    fn hex_and_pids() {
        assert_eq!(hex(&[0, 0xab, 0x10]), "00ab10");
        assert_eq!(unhex("00ab10").unwrap(), [0, 0xab, 0x10]);
        assert!(unhex("abc").is_err());
        for p in [Pids::Null, Pids::List(vec![]), Pids::List(vec![1, 22])] {
            assert_eq!(Pids::parse(&p.wire()).unwrap(), p);
        }
    }
}
