//! Command shells: one vendor or devipc call per typed command, run here or in a peer.
//!
//! A scenario drives every process of a cross-process rule through the same interface,
//! [`Exec`]: a command such as `VmmCommand::Import { fd, how }` goes either to this
//! process's shell (a [`Local`] executor calls the handler directly) or, as one JSON line
//! on `devipc-child`'s wire, to a peer process that runs the same handler ([`Remote`],
//! peers started with [`Remote::spawn`]). A reply is a JSON value or a [`Failure`]. So
//! one scenario function reads top to bottom, whichever process each step runs in, and
//! both sides make exactly the same calls.
//!
//! Each shell has one command type, an enum of one variant per call ([`acl::AclCommand`],
//! [`hip::HipCommand`], [`facade::FacadeCommand`]): the typed client (e.g. [`hip::Hip`])
//! builds the value, the handler matches on it, so a command is named once, in its enum.
//! [`Request`] wraps it with the steps every shell knows (a sleep).
//!
//! The vendor shells are [`acl`] and [`hip`], one folder each with a file per mechanism;
//! the devipc facade shell is [`facade`]; [`fd_pass`] moves a file descriptor between
//! shells (HIP VMM exports).

pub mod acl;
pub mod facade;
pub mod fd_pass;
pub mod hip;

use std::ffi::OsString;
use std::fmt;
use std::marker::PhantomData;
use std::time::Duration;

use devipc_child::{Child, hear, say};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::process;

/// Why a command failed; it crosses the wire as JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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

/// A command reply: its result as a JSON value (`null` for none), or why it failed.
pub type Reply = Result<Value, Failure>;

/// What a shell is asked to do: one of its own commands, or a step every shell knows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request<C> {
    /// One of the shell's commands.
    Run(C),
    /// Sleep this many milliseconds, then answer `null`: lets a scenario queue "sleep,
    /// then act" in a peer, to show that a wait in another process blocks until the act.
    Sleep(u64),
}

/// Runs one request of command type `C`.
pub trait Exec<C> {
    /// Runs `request` and returns its reply.
    fn exec(&mut self, request: Request<C>) -> Reply;

    /// Runs `command` and reads its reply as a `T` (a harness failure when it is not
    /// one): what every typed client method does.
    fn ask<T: DeserializeOwned>(&mut self, command: impl Into<C>) -> Result<T, Failure> {
        answer(self.exec(Request::Run(command.into())))
    }
}

/// A shell's command handler.
pub trait Handler {
    /// The shell's commands.
    type Command: DeserializeOwned;

    /// Runs one command.
    fn handle(&mut self, command: Self::Command) -> Reply;
}

/// The device-memory commands both vendor shells answer, by address: each vendor's
/// `MemoryCommand::Shared` carries one, and [`VendorClient`] sends them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Memory {
    /// `aclrtMalloc` / `hipMalloc` of `size` bytes: the address.
    Malloc {
        /// Bytes.
        size: usize,
    },
    /// `aclrtFree` / `hipFree`.
    Free {
        /// The address.
        ptr: u64,
    },
    /// `aclrtMemcpy` / `hipMemcpy` host to device.
    Write {
        /// The device address.
        dst: u64,
        /// The bytes.
        #[serde(with = "hex_bytes")]
        bytes: Vec<u8>,
    },
    /// `aclrtMemcpy` / `hipMemcpy` device to host: the bytes as hex.
    Read {
        /// The device address.
        src: u64,
        /// Bytes.
        len: usize,
    },
    /// `aclrtMemGetAddressRange` / `hipMemGetAddressRange`: (base, size).
    AddressRange {
        /// An address inside the allocation.
        ptr: u64,
    },
}

/// The client calls both vendor shells answer with the same commands ([`Memory`]).
/// [`acl::Acl`] and [`hip::Hip`] implement it, each on top of its own calls.
pub trait VendorClient {
    /// Runs one [`Memory`] command in the shell this client drives.
    fn memory<T: DeserializeOwned>(&mut self, command: Memory) -> Result<T, Failure>;

    /// `aclrtMalloc` / `hipMalloc` of `size` bytes: the address.
    fn malloc(&mut self, size: usize) -> Result<u64, Failure> {
        self.memory(Memory::Malloc { size })
    }

    /// `aclrtFree` / `hipFree`.
    fn free(&mut self, ptr: u64) -> Result<(), Failure> {
        self.memory(Memory::Free { ptr })
    }

    /// `aclrtMemcpy` / `hipMemcpy` host to device.
    fn write(&mut self, dst: u64, bytes: &[u8]) -> Result<(), Failure> {
        self.memory(Memory::Write {
            dst,
            bytes: bytes.to_vec(),
        })
    }

    /// `aclrtMemcpy` / `hipMemcpy` device to host.
    fn read(&mut self, src: u64, len: usize) -> Result<Vec<u8>, Failure> {
        unhex(&self.memory::<String>(Memory::Read { src, len })?)
    }

    /// `aclrtMemGetAddressRange` / `hipMemGetAddressRange`: (base, size).
    fn address_range(&mut self, ptr: u64) -> Result<(u64, usize), Failure> {
        self.memory(Memory::AddressRange { ptr })
    }
}

/// Runs commands in this process.
#[derive(Debug)]
pub struct Local<H>(pub H);

impl<H: Handler> Exec<H::Command> for Local<H> {
    fn exec(&mut self, request: Request<H::Command>) -> Reply {
        run(&mut self.0, request)
    }
}

fn run<H: Handler>(handler: &mut H, request: Request<H::Command>) -> Reply {
    match request {
        Request::Run(command) => handler.handle(command),
        Request::Sleep(ms) => {
            std::thread::sleep(Duration::from_millis(ms));
            done()
        }
    }
}

/// A peer process running a shell of command type `C`; killed on drop.
#[derive(Debug)]
pub struct Remote<C> {
    proc: Child,
    reply_timeout: Duration,
    commands: PhantomData<fn(C)>,
}

impl<C: Serialize> Remote<C> {
    /// Starts a peer in `role` (e.g. `acl-shell`, whose commands are `C`) for `target`,
    /// with `env` on top of this process's environment, and waits until its shell is
    /// ready.
    pub fn spawn(
        name: &str,
        role: &str,
        target: &str,
        env: &[(String, OsString)],
        reply_timeout: Duration,
    ) -> Result<Remote<C>, Failure> {
        let proc =
            process::spawn(name, &[role, target, name], env, false).map_err(Failure::Harness)?;
        let mut remote = Remote {
            proc,
            reply_timeout,
            commands: PhantomData,
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

    /// Sends a request without waiting for its reply (for calls that block until another
    /// process acts); collect the reply with [`Remote::reply`].
    pub fn send(&mut self, request: Request<C>) -> Result<(), Failure> {
        let line = serde_json::to_string(&request)
            .map_err(|e| Failure::harness(format!("encoding a request: {e}")))?;
        self.proc.send(&line).map_err(|e| {
            let what = e.describe(self.proc.name(), &line);
            Failure::harness(self.proc.explain(&what))
        })
    }

    /// The reply to the request sent last.
    pub fn reply(&mut self) -> Reply {
        self.reply_within(self.reply_timeout)
    }

    /// The reply to the request sent last, if it comes within `limit` (never later than
    /// the reply timeout); a harness failure otherwise.
    pub fn reply_within(&mut self, limit: Duration) -> Reply {
        let malformed = |what: &str, v: &str, e: serde_json::Error| {
            Failure::harness(format!("peer answered a malformed {what} `{v}`: {e}"))
        };
        match self.proc.next(limit.min(self.reply_timeout)) {
            Ok((k, v)) if k == "ok" => {
                serde_json::from_str(&v).map_err(|e| malformed("reply", &v, e))
            }
            Ok((k, v)) if k == "err" => {
                Err(serde_json::from_str(&v).unwrap_or_else(|e| malformed("failure", &v, e)))
            }
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

    /// Ends the shell (closes its input) and checks that the peer exited cleanly.
    pub fn finish(mut self) -> Result<(), Failure> {
        let name = self.proc.name().to_owned();
        self.proc
            .finish(self.reply_timeout)
            .map_err(|how| Failure::harness(self.proc.explain(&format!("peer `{name}` {how}"))))
    }
}

impl<C: Serialize> Exec<C> for Remote<C> {
    fn exec(&mut self, request: Request<C>) -> Reply {
        self.send(request)?;
        self.reply()
    }
}

/// The peer's side: announces `ready` and answers one request per line (JSON, a
/// [`Request`] of the handler's commands) until the end of input. `start` builds the
/// handler; its error is reported as `fatal`.
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
        let reply = match serde_json::from_str(&line) {
            Ok(request) => run(&mut handler, request),
            Err(e) => Err(Failure::harness(format!("malformed request `{line}`: {e}"))),
        };
        match reply {
            Ok(value) => say("ok", &value.to_string()),
            Err(f) => say("err", &json(&f)),
        }
    }
    drop(handler);
    Ok(())
}

/// `value` as one line of JSON (a value whose encoding fails, which none of this crate's
/// do, becomes `null`).
fn json<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "null".into())
}

/// The reply of a command with no result.
pub fn done() -> Reply {
    Ok(Value::Null)
}

/// The reply of a command whose result is `value`.
pub fn value<T: Serialize>(value: T) -> Reply {
    serde_json::to_value(value).map_err(|e| Failure::harness(format!("encoding a reply: {e}")))
}

/// A reply read as a `T`; a harness failure when it is not one.
pub fn answer<T: DeserializeOwned>(reply: Reply) -> Result<T, Failure> {
    let value = reply?;
    serde_json::from_value(value.clone())
        .map_err(|e| Failure::harness(format!("unexpected reply `{value}`: {e}")))
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

/// Serde for a command's bytes as [`hex`] (`#[serde(with = "hex_bytes")]`), half the
/// size of a JSON array of numbers.
pub mod hex_bytes {
    use super::{Deserialize, Deserializer, Serializer, hex, unhex};

    /// Writes `bytes` as hex.
    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&hex(bytes))
    }

    /// Reads hex back into bytes.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        unhex(&text).map_err(serde::de::Error::custom)
    }
}

/// A pid list argument.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Pids {
    /// A NULL pointer (with a count of 1).
    Null,
    /// These pids (possibly none: a non-NULL pointer with a count of 0).
    List(Vec<i32>),
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
            assert_eq!(serde_json::from_str::<Failure>(&json(&f)).unwrap(), f);
        }
    }

    #[test]
    fn hex_and_pids() {
        assert_eq!(hex(&[0, 0xab, 0x10]), "00ab10");
        assert_eq!(unhex("00ab10").unwrap(), [0, 0xab, 0x10]);
        assert!(unhex("abc").is_err());
        for p in [Pids::Null, Pids::List(vec![]), Pids::List(vec![1, 22])] {
            assert_eq!(serde_json::from_str::<Pids>(&json(&p)).unwrap(), p);
        }
    }

    #[test]
    fn requests_round_trip_as_one_line() {
        let write = Request::Run(Memory::Write {
            dst: 7,
            bytes: vec![0, 0xab, 0x10],
        });
        let line = json(&write);
        assert!(line.contains("\"00ab10\""), "{line}");
        assert!(!line.contains('\n'), "{line}");
        assert_eq!(
            serde_json::from_str::<Request<Memory>>(&line).unwrap(),
            write
        );
        let sleep = Request::<Memory>::Sleep(300);
        assert_eq!(
            serde_json::from_str::<Request<Memory>>(&json(&sleep)).unwrap(),
            sleep
        );
        assert_eq!(
            answer::<(u64, usize)>(value((1u64, 2usize))).unwrap(),
            (1, 2)
        );
        assert!(matches!(answer::<u64>(done()), Err(Failure::Harness(_))));
    }
}
