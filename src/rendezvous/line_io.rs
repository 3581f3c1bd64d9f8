//! Bounded, deadline-limited line I/O on a Unix socket: lines of at most [`MAX_LINE`]
//! bytes, read and sent never past a deadline.

use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use devipc_core::Error;
use devipc_shm::os;

use super::wire::MAX_LINE;

/// Why no line could be read.
#[derive(Debug)]
pub(super) enum LineError {
    /// The deadline passed.
    Timeout,
    /// The peer closed the connection before sending a single byte.
    Closed,
    /// The peer closed the connection in the middle of a line.
    Eof,
    /// No `\n` within [`MAX_LINE`] bytes.
    TooLong,
    /// A byte outside printable ASCII.
    NotText(u8),
    /// The socket failed.
    Io(io::Error),
}

impl LineError {
    /// A sentence for an `ERR` reply.
    pub(super) fn describe(&self, what: &str, after: Duration) -> String {
        match self {
            LineError::Timeout => format!("{what} did not complete within {after:?}"),
            LineError::Closed | LineError::Eof => {
                format!("the connection closed before {what} was complete")
            }
            LineError::TooLong => format!("{what} is longer than {MAX_LINE} bytes"),
            LineError::NotText(b) => {
                format!("{what} contains byte {b:#04x}; lines are printable ASCII")
            }
            LineError::Io(e) => format!("reading {what} failed: {e}"),
        }
    }

    pub(super) fn into_error(
        self,
        ctx: impl std::fmt::Display,
        what: &str,
        after: Duration,
    ) -> Error {
        let sentence = self.describe(what, after);
        match self {
            LineError::Timeout => Error::Timeout {
                what: format!("{ctx}: {what}"),
                after,
            },
            LineError::Closed | LineError::Eof => Error::io(
                format!("{ctx}: reading {what}"),
                io::Error::new(io::ErrorKind::UnexpectedEof, sentence),
            ),
            LineError::TooLong | LineError::NotText(_) => {
                Error::invalid_argument(format!("{ctx}: {sentence}"))
            }
            LineError::Io(e) => Error::io(format!("{ctx}: reading {what}"), e),
        }
    }
}

/// The bytes of a line being received: at most [`MAX_LINE`] and a `\n`, plus one read's
/// worth past it; and the first file descriptor the peer attached (`SCM_RIGHTS`: the
/// exporter of a `hip-vmm-fd` token sends the object's fd with its offer).
#[derive(Debug, Default)]
pub(super) struct LineBuffer {
    buf: Vec<u8>,
    /// Whether any byte arrived yet.
    received: bool,
    /// The first descriptor received; any later one is closed at once (a peer gets to
    /// hand over one object, and cannot pile descriptors up in this process).
    fd: Option<OwnedFd>,
}

impl LineBuffer {
    /// The first complete line, or why there will be none; `None`: not enough bytes yet.
    pub(super) fn take_line(&mut self) -> Option<std::result::Result<String, LineError>> {
        if let Some(end) = self.buf.iter().position(|b| *b == b'\n') {
            if end > MAX_LINE {
                return Some(Err(LineError::TooLong));
            }
            let line: Vec<u8> = self.buf.drain(..=end).take(end).collect();
            if let Some(&bad) = line.iter().find(|b| !(b' '..=b'~').contains(*b)) {
                return Some(Err(LineError::NotText(bad)));
            }
            return Some(Ok(line.into_iter().map(char::from).collect()));
        }
        if self.buf.len() > MAX_LINE {
            return Some(Err(LineError::TooLong));
        }
        None
    }

    /// The descriptor the peer attached, if any (taken once).
    pub(super) fn take_fd(&mut self) -> Option<OwnedFd> {
        self.fd.take()
    }

    /// One `read` into the buffer (`recvmsg`, taking attached descriptors). `Ok(false)`:
    /// the socket has nothing now (non-blocking) or its read timeout passed.
    pub(super) fn fill(&mut self, stream: &UnixStream) -> std::result::Result<bool, LineError> {
        let mut chunk = [0u8; 512];
        loop {
            return match os::recv_with_fds(stream, &mut chunk) {
                Ok((0, _)) if !self.received => Err(LineError::Closed),
                Ok((0, _)) => Err(LineError::Eof),
                Ok((n, fds)) => {
                    self.received = true;
                    self.buf.extend_from_slice(&chunk[..n]);
                    for fd in fds {
                        if self.fd.is_none() {
                            self.fd = Some(fd);
                        }
                    }
                    Ok(true)
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    Ok(false)
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => Err(LineError::Io(e)),
            };
        }
    }

    /// Reads what a non-blocking `stream` has, without waiting: the first line, or why
    /// there will be none; `None` while it is incomplete.
    pub(super) fn read_available(
        &mut self,
        stream: &UnixStream,
    ) -> Option<std::result::Result<String, LineError>> {
        loop {
            if let Some(line) = self.take_line() {
                return Some(line);
            }
            match self.fill(stream) {
                Ok(true) => {}
                Ok(false) => return None,
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

/// Reads `\n`-terminated lines of at most [`MAX_LINE`] bytes from a blocking socket, never
/// past a deadline.
pub(super) struct LineReader<'a> {
    stream: &'a UnixStream,
    deadline: Instant,
    buf: LineBuffer,
}

impl<'a> LineReader<'a> {
    pub(super) fn new(stream: &'a UnixStream, deadline: Instant) -> Self {
        LineReader {
            stream,
            deadline,
            buf: LineBuffer::default(),
        }
    }

    /// The descriptor the peer attached to what was read so far, if any (taken once).
    pub(super) fn take_fd(&mut self) -> Option<OwnedFd> {
        self.buf.take_fd()
    }

    pub(super) fn read_line(&mut self) -> std::result::Result<String, LineError> {
        loop {
            if let Some(line) = self.buf.take_line() {
                return line;
            }
            let left = self.deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(LineError::Timeout);
            }
            self.stream
                .set_read_timeout(Some(left))
                .map_err(LineError::Io)?;
            if !self.buf.fill(self.stream)? {
                return Err(LineError::Timeout);
            }
        }
    }
}

/// Sends all of `bytes` before `deadline`, without `SIGPIPE` (a vanished peer is an
/// error, not a signal that kills an embedding host).
pub(super) fn send_all(stream: &UnixStream, mut bytes: &[u8], deadline: Instant) -> io::Result<()> {
    while !bytes.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the peer did not take the data in time",
            ));
        }
        stream.set_write_timeout(Some(left))?;
        match os::send_nosignal(stream, bytes) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the peer did not take the data in time",
                ));
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::atomic::Ordering;

    use super::*;

    const LONG: Duration = Duration::from_secs(30);

    #[test]
    fn lines_are_split_bounded_and_deadline_limited() {
        let (a, mut b) = UnixStream::pair().unwrap();
        b.write_all(b"first\nsecond\nthi").unwrap();
        let mut r = LineReader::new(&a, Instant::now() + LONG);
        assert_eq!(r.read_line().unwrap(), "first");
        assert_eq!(r.read_line().unwrap(), "second");
        b.write_all(b"rd\n").unwrap();
        assert_eq!(r.read_line().unwrap(), "third");
        // Exactly MAX_LINE is fine, one more is not.
        b.write_all(&[b'x'; MAX_LINE]).unwrap();
        b.write_all(b"\n").unwrap();
        assert_eq!(r.read_line().unwrap().len(), MAX_LINE);
        b.write_all(&[b'y'; MAX_LINE + 1]).unwrap();
        b.write_all(b"\n").unwrap();
        assert!(matches!(r.read_line(), Err(LineError::TooLong)));

        // Without a newline at all, the reader stops after MAX_LINE + 1 bytes, not at EOF.
        let (a, mut b) = UnixStream::pair().unwrap();
        let writer = std::thread::spawn(move || {
            let _ = b.write_all(&vec![b'z'; 64 * MAX_LINE]);
            b
        });
        let mut r = LineReader::new(&a, Instant::now() + LONG);
        assert!(matches!(r.read_line(), Err(LineError::TooLong)));
        drop(a);
        drop(writer.join().unwrap());

        let (a, mut b) = UnixStream::pair().unwrap();
        b.write_all(b"tab\there\n").unwrap();
        assert!(matches!(
            LineReader::new(&a, Instant::now() + LONG).read_line(),
            Err(LineError::NotText(b'\t'))
        ));
        let (a, mut b) = UnixStream::pair().unwrap();
        b.write_all(b"cr\r\n").unwrap();
        assert!(matches!(
            LineReader::new(&a, Instant::now() + LONG).read_line(),
            Err(LineError::NotText(b'\r'))
        ));

        // A peer that says nothing runs into the deadline; one that leaves, into EOF.
        let (a, b) = UnixStream::pair().unwrap();
        let start = Instant::now();
        let mut r = LineReader::new(&a, start + Duration::from_millis(100));
        assert!(matches!(r.read_line(), Err(LineError::Timeout)));
        assert!(start.elapsed() >= Duration::from_millis(100));
        drop(b);
        let mut r = LineReader::new(&a, Instant::now() + LONG);
        assert!(matches!(r.read_line(), Err(LineError::Closed)));
        let (a, mut b) = UnixStream::pair().unwrap();
        b.write_all(b"whole\nhalf").unwrap();
        drop(b);
        let mut r = LineReader::new(&a, Instant::now() + LONG);
        assert_eq!(r.read_line().unwrap(), "whole");
        assert!(matches!(r.read_line(), Err(LineError::Eof)));
        let (a, mut b) = UnixStream::pair().unwrap();
        b.write_all(b"whole\n").unwrap();
        drop(b);
        let mut r = LineReader::new(&a, Instant::now() + LONG);
        assert_eq!(r.read_line().unwrap(), "whole");
        assert!(
            matches!(r.read_line(), Err(LineError::Eof)),
            "after a line, closing ends a conversation; it is not a probe"
        );
    }

    #[test]
    fn a_trickling_peer_cannot_outlast_the_deadline() {
        let (a, mut b) = UnixStream::pair().unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stop2 = stop.clone();
        let trickler = std::thread::spawn(move || {
            while !stop2.load(Ordering::Relaxed) {
                if b.write_all(b"x").is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        let start = Instant::now();
        let mut r = LineReader::new(&a, start + Duration::from_millis(200));
        assert!(matches!(r.read_line(), Err(LineError::Timeout)));
        assert!(start.elapsed() < Duration::from_secs(5));
        stop.store(true, Ordering::Relaxed);
        trickler.join().unwrap();
    }

    #[test]
    fn sending_to_a_vanished_peer_is_an_error() {
        let (a, b) = UnixStream::pair().unwrap();
        drop(b);
        let err = send_all(&a, b"hello\n", Instant::now() + LONG).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::BrokenPipe);
        // A peer that never reads: the deadline ends the send.
        let (a, _b) = UnixStream::pair().unwrap();
        let big = vec![0u8; 16 << 20];
        let err = send_all(&a, &big, Instant::now() + Duration::from_millis(100)).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
    }
}
