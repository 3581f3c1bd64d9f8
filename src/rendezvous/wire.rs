//! The protocol's lines: the importer's hello, the exporter's offer or refusal, and the
//! decoder of the reply (see "Protocol, version 1" in the [module docs](super)).

use std::io;

use devipc_core::{BackendKind, Error, MemToken, ProcessId, SignalToken};

use crate::runtime::Runtime;

/// First field of the importer's hello: names the protocol.
pub const MAGIC: &str = "DEVIPC-RENDEZVOUS";
/// The protocol version this crate speaks.
pub const PROTOCOL_VERSION: u32 = 1;
/// Longest line either side accepts, in bytes without the `\n` (a signal token line
/// needs about 270).
pub const MAX_LINE: usize = 1024;
/// Most signals one exporter hands out with a buffer.
pub const MAX_SIGNALS: usize = 64;

/// The importer's first and only line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Hello {
    pub(super) version: u32,
    pub(super) pid: ProcessId,
    pub(super) backend: BackendKind,
}

impl Hello {
    pub(super) fn encode(&self) -> String {
        format!(
            "{MAGIC} {} pid={} backend={}\n",
            self.version, self.pid, self.backend
        )
    }

    /// Parses a hello line (without its `\n`); the error is the reason sent back.
    pub(super) fn parse(line: &str) -> std::result::Result<Hello, String> {
        let mut fields = line.split(' ');
        if fields.next() != Some(MAGIC) {
            return Err(format!(
                "not a devipc rendezvous hello (expected it to start with `{MAGIC} `)"
            ));
        }
        let version = fields
            .next()
            .and_then(parse_decimal)
            .ok_or("the protocol version is missing or not a decimal number")?;
        if version != PROTOCOL_VERSION {
            return Err(format!(
                "unsupported protocol version {version}; this exporter speaks version {PROTOCOL_VERSION}"
            ));
        }
        let (mut pid, mut backend) = (None, None);
        for field in fields {
            let (key, value) = field
                .split_once('=')
                .filter(|(k, _)| !k.is_empty())
                .ok_or_else(|| format!("field `{field}` is not key=value"))?;
            let seen = match key {
                "pid" => pid.replace(value).is_some(),
                "backend" => backend.replace(value).is_some(),
                _ => false,
            };
            if seen {
                return Err(format!("field `{key}` appears twice"));
            }
        }
        let pid = pid.ok_or("the pid field is missing")?;
        let pid = parse_decimal(pid)
            .filter(|p| *p != 0)
            .ok_or_else(|| format!("pid `{pid}` is not a non-zero decimal process id"))?;
        let backend = backend.ok_or("the backend field is missing")?;
        let backend = BackendKind::ALL
            .into_iter()
            .find(|k| k.name() == backend)
            .ok_or_else(|| format!("unknown backend `{backend}`"))?;
        Ok(Hello {
            version,
            pid: ProcessId(pid),
            backend,
        })
    }
}

/// A `u32` in plain decimal: digits only, no sign, no leading zeros beyond `0` itself.
fn parse_decimal(s: &str) -> Option<u32> {
    let canonical =
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0'));
    canonical.then(|| s.parse().ok()).flatten()
}

/// The category of an `ERR` reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ErrCode {
    /// Credentials refused.
    Denied,
    /// The hello was malformed, late or of another version.
    Protocol,
    /// The importer runs another backend.
    Backend,
    /// The exporter failed (or a code this version does not know).
    Failed,
}

impl ErrCode {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            ErrCode::Denied => "denied",
            ErrCode::Protocol => "protocol",
            ErrCode::Backend => "backend",
            ErrCode::Failed => "failed",
        }
    }

    pub(super) fn parse(s: &str) -> ErrCode {
        match s {
            "denied" => ErrCode::Denied,
            "protocol" => ErrCode::Protocol,
            "backend" => ErrCode::Backend,
            _ => ErrCode::Failed,
        }
    }

    /// The importer's error for an exporter's refusal.
    pub(super) fn into_error(self, ctx: &str, reason: String, rt: &Runtime) -> Error {
        let context = format!("{ctx}: the exporter refused");
        match self {
            ErrCode::Denied => Error::io(
                context,
                io::Error::new(io::ErrorKind::PermissionDenied, reason),
            ),
            ErrCode::Protocol => Error::invalid_argument(format!("{context}: {reason}")),
            ErrCode::Backend => Error::BackendMismatch {
                expected: format!("an exporter running {}", rt.info().kind),
                found: format!("{ctx}: {reason}"),
            },
            ErrCode::Failed => Error::io(context, io::Error::other(reason)),
        }
    }
}

/// `ERR <code> <reason>\n`, the reason made printable ASCII and cut to fit [`MAX_LINE`].
pub(super) fn encode_refusal(code: ErrCode, reason: &str) -> String {
    let mut line = format!("ERR {} ", code.as_str());
    let room = MAX_LINE - line.len();
    line.extend(
        reason
            .chars()
            .map(|c| {
                if c == ' ' || c.is_ascii_graphic() {
                    c
                } else {
                    '?'
                }
            })
            .take(room),
    );
    line.push('\n');
    line
}

/// `OK`, the memory token, the signal tokens, `END`.
pub(super) fn encode_offer(mem: &MemToken, signals: &[&SignalToken]) -> String {
    let mut out = format!("OK\nmem {mem}\n");
    for s in signals {
        out.push_str(&format!("signal {s}\n"));
    }
    out.push_str("END\n");
    out
}

/// What the exporter answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Reply {
    /// The tokens, already granted to us.
    Offer {
        mem: MemToken,
        signals: Vec<SignalToken>,
    },
    /// `ERR <code> <reason>`.
    Refused { code: ErrCode, reason: String },
}

/// Reads the exporter's reply line by line.
#[derive(Debug, Default)]
pub(super) struct ReplyDecoder {
    state: DecodeState,
    mem: Option<MemToken>,
    signals: Vec<SignalToken>,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum DecodeState {
    /// Expecting `OK` or `ERR`.
    #[default]
    Start,
    /// Expecting `mem <token>`.
    Mem,
    /// Expecting `signal <token>` or `END`.
    Signals,
}

/// A reply that breaks the protocol.
#[derive(Debug)]
pub(super) enum ReplyError {
    /// Not the line the protocol expects here.
    Protocol(String),
    /// A token line whose token does not parse.
    Token(String),
}

impl ReplyError {
    pub(super) fn into_error(self, ctx: &str) -> Error {
        match self {
            ReplyError::Protocol(what) => Error::invalid_argument(format!(
                "{ctx}: the peer does not speak the devipc rendezvous protocol: {what}"
            )),
            ReplyError::Token(reason) => {
                Error::invalid_token(format!("{ctx}: the exporter sent {reason}"))
            }
        }
    }
}

impl ReplyDecoder {
    /// Feeds one line; `Some` when the reply is complete.
    pub(super) fn push(&mut self, line: &str) -> std::result::Result<Option<Reply>, ReplyError> {
        let unexpected = |want: &str| {
            let shown: String = line.chars().take(64).collect();
            ReplyError::Protocol(format!("expected {want}, got `{shown}`"))
        };
        match self.state {
            DecodeState::Start => {
                if line == "OK" {
                    self.state = DecodeState::Mem;
                    return Ok(None);
                }
                if let Some(rest) = line.strip_prefix("ERR ") {
                    let (code, reason) = rest.split_once(' ').unwrap_or((rest, ""));
                    return Ok(Some(Reply::Refused {
                        code: ErrCode::parse(code),
                        reason: reason.to_owned(),
                    }));
                }
                Err(unexpected("`OK` or `ERR <code> <reason>`"))
            }
            DecodeState::Mem => {
                let text = line
                    .strip_prefix("mem ")
                    .ok_or_else(|| unexpected("`mem <token>`"))?;
                let mem = MemToken::from_text(text)
                    .map_err(|e| ReplyError::Token(format!("a bad memory token: {e}")))?;
                self.mem = Some(mem);
                self.state = DecodeState::Signals;
                Ok(None)
            }
            DecodeState::Signals => {
                if line == "END" {
                    let mem = self
                        .mem
                        .take()
                        .ok_or_else(|| unexpected("a memory token first"))?;
                    return Ok(Some(Reply::Offer {
                        mem,
                        signals: std::mem::take(&mut self.signals),
                    }));
                }
                let text = line
                    .strip_prefix("signal ")
                    .ok_or_else(|| unexpected("`signal <token>` or `END`"))?;
                if self.signals.len() >= MAX_SIGNALS {
                    return Err(ReplyError::Protocol(format!(
                        "more than {MAX_SIGNALS} signals"
                    )));
                }
                let signal = SignalToken::from_text(text).map_err(|e| {
                    ReplyError::Token(format!(
                        "a bad token for signal {}: {e}",
                        self.signals.len()
                    ))
                })?;
                self.signals.push(signal);
                Ok(None)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rendezvous::tests::{is_io, mem_token, probe_runtime, signal_token};

    #[test]
    fn hello_encodes_and_parses() {
        let hello = Hello {
            version: PROTOCOL_VERSION,
            pid: ProcessId(4242),
            backend: BackendKind::Ascend,
        };
        let line = hello.encode();
        assert_eq!(line, "DEVIPC-RENDEZVOUS 1 pid=4242 backend=ascend\n");
        assert_eq!(Hello::parse(line.trim_end()), Ok(hello));
        // Field order is free and unknown fields are ignored.
        assert_eq!(
            Hello::parse("DEVIPC-RENDEZVOUS 1 future=x backend=ascend pid=4242"),
            Ok(hello)
        );
    }

    #[test]
    fn bad_hellos_are_refused_with_a_reason() {
        let cases = [
            ("", "not a devipc rendezvous hello"),
            ("GET / HTTP/1.1", "not a devipc rendezvous hello"),
            ("DEVIPC-RENDEZVOUS", "version is missing"),
            (
                "DEVIPC-RENDEZVOUS x pid=1 backend=hip",
                "version is missing",
            ),
            (
                "DEVIPC-RENDEZVOUS 2 pid=1 backend=hip",
                "unsupported protocol version 2",
            ),
            ("DEVIPC-RENDEZVOUS 1 backend=hip", "pid field is missing"),
            ("DEVIPC-RENDEZVOUS 1 pid=1", "backend field is missing"),
            ("DEVIPC-RENDEZVOUS 1 pid=0 backend=hip", "non-zero decimal"),
            ("DEVIPC-RENDEZVOUS 1 pid=-1 backend=hip", "non-zero decimal"),
            ("DEVIPC-RENDEZVOUS 1 pid=+1 backend=hip", "non-zero decimal"),
            ("DEVIPC-RENDEZVOUS 1 pid=01 backend=hip", "non-zero decimal"),
            (
                "DEVIPC-RENDEZVOUS 1 pid=4294967296 backend=hip",
                "non-zero decimal",
            ),
            (
                "DEVIPC-RENDEZVOUS 1 pid=1 backend=cuda",
                "unknown backend `cuda`",
            ),
            (
                "DEVIPC-RENDEZVOUS 1 pid=1 backend=HIP",
                "unknown backend `HIP`",
            ),
            (
                "DEVIPC-RENDEZVOUS 1 pid=1 pid=2 backend=hip",
                "`pid` appears twice",
            ),
            (
                "DEVIPC-RENDEZVOUS 1 pid=1  backend=hip",
                "field `` is not key=value",
            ),
            (
                "DEVIPC-RENDEZVOUS 1 pid=1 backend=hip x",
                "field `x` is not key=value",
            ),
            (
                "DEVIPC-RENDEZVOUS 1 pid=1 backend=hip =y",
                "field `=y` is not key=value",
            ),
        ];
        for (line, want) in cases {
            let reason = Hello::parse(line).unwrap_err();
            assert!(reason.contains(want), "{line:?}: {reason:?} lacks {want:?}");
        }
    }

    #[test]
    fn decimals_are_canonical() {
        assert_eq!(parse_decimal("0"), Some(0));
        assert_eq!(parse_decimal("4294967295"), Some(u32::MAX));
        for bad in [
            "",
            "00",
            "007",
            "1e3",
            " 1",
            "1 ",
            "0x10",
            "4294967296",
            "١",
        ] {
            assert_eq!(parse_decimal(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_refusal_is_one_bounded_printable_line() {
        let line = encode_refusal(ErrCode::Denied, "pid 7\nis not\tyou: ünïcode");
        assert_eq!(line, "ERR denied pid 7?is not?you: ?n?code\n");
        let long = encode_refusal(ErrCode::Failed, &"x".repeat(5 * MAX_LINE));
        assert_eq!(long.len(), MAX_LINE + 1);
        let mut decoder = ReplyDecoder::default();
        assert_eq!(
            decoder.push(long.trim_end()).unwrap(),
            Some(Reply::Refused {
                code: ErrCode::Failed,
                reason: "x".repeat(MAX_LINE - "ERR failed ".len())
            })
        );
    }

    #[test]
    fn offers_decode_back_to_their_tokens() {
        let mem = mem_token();
        for n in [0, 1, 3] {
            let signals: Vec<SignalToken> = (0..n).map(|i| signal_token(i as u8 + 1)).collect();
            let refs: Vec<&SignalToken> = signals.iter().collect();
            let text = encode_offer(&mem, &refs);
            let mut decoder = ReplyDecoder::default();
            let mut reply = None;
            for line in text.lines() {
                assert!(line.len() <= MAX_LINE);
                assert!(reply.is_none(), "lines after the end: {text}");
                reply = decoder.push(line).unwrap();
            }
            assert_eq!(
                reply,
                Some(Reply::Offer {
                    mem: mem.clone(),
                    signals
                })
            );
        }
    }

    #[test]
    fn replies_that_break_the_protocol_are_typed_errors() {
        let mem = format!("mem {}", mem_token());
        let sig = format!("signal {}", signal_token(1));
        let bad_mem = format!("mem {}", &mem_token().to_text()[..40]);
        let cases: Vec<(Vec<&str>, &str)> = vec![
            (vec!["HTTP/1.1 200 OK"], "expected `OK`"),
            (vec!["ok"], "expected `OK`"),
            (vec!["OK", "END"], "expected `mem <token>`"),
            (vec!["OK", &sig], "expected `mem <token>`"),
            (vec!["OK", "mem garbage"], "bad memory token"),
            (vec!["OK", &bad_mem], "bad memory token"),
            (vec!["OK", &mem, &mem], "expected `signal <token>` or `END`"),
            (
                vec!["OK", &mem, "signal devipc3:AAAA"],
                "bad token for signal 0",
            ),
            (vec!["OK", &mem, &mem[4..]], "expected `signal"),
        ];
        for (lines, want) in cases {
            let mut decoder = ReplyDecoder::default();
            let mut result = Ok(None);
            for line in &lines {
                result = decoder.push(line);
                if result.is_err() {
                    break;
                }
            }
            let err = result.unwrap_err().into_error("ctx");
            assert!(err.to_string().contains(want), "{lines:?}: {err}");
            let token_error = want.contains("bad");
            assert_eq!(
                matches!(err, Error::InvalidToken { .. }),
                token_error,
                "{err:?}"
            );
            assert_eq!(
                matches!(err, Error::InvalidArgument { .. }),
                !token_error,
                "{err:?}"
            );
        }
        // At most MAX_SIGNALS signals.
        let mut decoder = ReplyDecoder::default();
        decoder.push("OK").unwrap();
        decoder.push(&mem).unwrap();
        for _ in 0..MAX_SIGNALS {
            decoder.push(&sig).unwrap();
        }
        let err = decoder.push(&sig).unwrap_err().into_error("ctx");
        assert!(err.to_string().contains("more than 64 signals"), "{err}");
    }

    #[test]
    fn refusal_codes_become_typed_importer_errors() {
        let rt = probe_runtime();
        let err = |code: &str| {
            let mut d = ReplyDecoder::default();
            match d.push(&format!("ERR {code} because")).unwrap().unwrap() {
                Reply::Refused { code, reason } => code.into_error("ctx", reason, &rt),
                other => panic!("{other:?}"),
            }
        };
        assert!(is_io(&err("denied"), io::ErrorKind::PermissionDenied));
        assert!(matches!(err("protocol"), Error::InvalidArgument { .. }));
        assert!(matches!(err("backend"), Error::BackendMismatch { .. }));
        assert!(is_io(&err("failed"), io::ErrorKind::Other));
        assert!(is_io(&err("from-the-future"), io::ErrorKind::Other));
        assert!(err("denied").to_string().contains("because"));
    }
}
