//! The child's pipes: non-blocking reads with a poll, the threads that pump its stdout
//! into bounded lines and a bounded inbox of messages, and the kept tail of its stderr.

use std::collections::VecDeque;
use std::io::{ErrorKind, Read};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::wire;
use crate::{INBOX_BYTES, MAX_LINE, Message, POLL_SLICE};

/// Sets `O_NONBLOCK` on `fd`.
pub(crate) fn set_nonblocking(fd: RawFd) -> std::io::Result<()> {
    // SAFETY: fcntl(2) on a descriptor this process owns (the parent's end of a pipe);
    // F_GETFL/F_SETFL touch only its status flags.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    // SAFETY: as above.
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Waits up to `timeout` (`None`: no limit) until `fd` has `events` (or is closed);
/// whether it has.
pub(crate) fn poll_fd(
    fd: RawFd,
    events: libc::c_short,
    timeout: Option<Duration>,
) -> std::io::Result<bool> {
    let ms = timeout.map_or(-1, |t| {
        libc::c_int::try_from(t.as_millis().max(u128::from(!t.is_zero())))
            .unwrap_or(libc::c_int::MAX)
    });
    let mut pfd = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    loop {
        // SAFETY: one valid pollfd for an open descriptor, for the length of the call.
        match unsafe { libc::poll(&mut pfd, 1, ms) } {
            n if n > 0 => return Ok(true),
            0 => return Ok(false),
            _ => {
                let e = std::io::Error::last_os_error();
                if e.kind() != ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
}

/// Reads a pipe from the child until its end, handing each chunk to `sink` (which
/// returns `false` to stop). Also stops once the child has ended (`ended`, set by the
/// [`Child`] that saw it) and the pipe stays empty for a moment: everything the child
/// wrote has been read then, and a descendant that still holds the pipe open does not
/// keep the reader (and whoever waits for it) waiting.
pub(crate) fn pump(
    mut pipe: impl Read + AsRawFd,
    ended: &AtomicBool,
    mut sink: impl FnMut(&[u8]) -> bool,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let ended_before = ended.load(Ordering::Acquire);
        match poll_fd(pipe.as_raw_fd(), libc::POLLIN, Some(POLL_SLICE)) {
            Ok(true) => {}
            Ok(false) if ended_before => return,
            Ok(false) => continue,
            Err(_) => return,
        }
        match pipe.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                if !sink(&buf[..n]) {
                    return;
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// What the stdout reader hands the parent.
#[derive(Debug)]
pub(crate) enum Item {
    Message(Message),
    /// A message line longer than [`MAX_LINE`], with its key (cut to 100 bytes).
    TooLong {
        key: String,
    },
}

impl Item {
    /// Bytes it holds, for the inbox's budget.
    pub(crate) fn size(&self) -> usize {
        match self {
            Item::Message((k, v)) => k.len() + v.len() + 16,
            Item::TooLong { key } => key.len() + 16,
        }
    }
}

/// Splits the child's stdout into lines, holding at most [`MAX_LINE`] bytes of one, and
/// turns message lines into [`Item`]s.
#[derive(Debug, Default)]
pub(crate) struct Lines {
    pub(crate) line: Vec<u8>,
    /// The current line is longer than `MAX_LINE` (only its start is held).
    pub(crate) overlong: bool,
}

impl Lines {
    /// Takes the next bytes; `emit` gets each item and returns `false` to stop (then so
    /// does `feed`).
    pub(crate) fn feed(&mut self, mut bytes: &[u8], emit: &mut impl FnMut(Item) -> bool) -> bool {
        while !bytes.is_empty() {
            let (part, rest, complete) = match bytes.iter().position(|&b| b == b'\n') {
                Some(i) => (&bytes[..i], &bytes[i + 1..], true),
                None => (bytes, &[][..], false),
            };
            let room = MAX_LINE - self.line.len();
            if part.len() > room {
                self.overlong = true;
            }
            self.line.extend_from_slice(&part[..part.len().min(room)]);
            bytes = rest;
            if complete && !self.flush(emit) {
                return false;
            }
        }
        true
    }

    /// The end of the output: a last line without a line end counts too.
    pub(crate) fn finish(&mut self, emit: &mut impl FnMut(Item) -> bool) {
        if !self.line.is_empty() {
            self.flush(emit);
        }
    }

    pub(crate) fn flush(&mut self, emit: &mut impl FnMut(Item) -> bool) -> bool {
        let line = std::mem::take(&mut self.line);
        let overlong = std::mem::replace(&mut self.overlong, false);
        let mut line = &line[..];
        if let [rest @ .., b'\r'] = line {
            line = rest;
        }
        let item = if overlong {
            line.strip_prefix(b"@@ ").map(|msg| {
                let key = msg.split(|&b| b == b' ').next().unwrap_or_default();
                let key = &key[..key.len().min(100)];
                Item::TooLong {
                    key: String::from_utf8_lossy(key).into_owned(),
                }
            })
        } else {
            wire::parse_message(&String::from_utf8_lossy(line)).map(Item::Message)
        };
        item.is_none_or(emit)
    }
}

/// The messages read from the child's stdout and not yet received, bounded in bytes
/// ([`INBOX_BYTES`]).
#[derive(Debug, Default)]
pub(crate) struct Inbox {
    pub(crate) state: Mutex<InboxState>,
    pub(crate) changed: Condvar,
}

#[derive(Debug, Default)]
pub(crate) struct InboxState {
    pub(crate) items: VecDeque<Item>,
    pub(crate) bytes: usize,
    /// The reader is done: no item comes after those queued.
    pub(crate) ended: bool,
    /// The [`Child`] is gone: nothing is received any more.
    pub(crate) closed: bool,
}

/// What [`Inbox::pop`] found.
pub(crate) enum Popped {
    Item(Item),
    Ended,
    Empty,
}

impl Inbox {
    pub(crate) fn lock(&self) -> MutexGuard<'_, InboxState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `item`, waiting while the budget is spent; `false` once the parent is gone.
    pub(crate) fn push(&self, item: Item) -> bool {
        let size = item.size();
        let mut s = self.lock();
        while !s.closed && !s.items.is_empty() && s.bytes + size > INBOX_BYTES {
            s = self.changed.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        if s.closed {
            return false;
        }
        s.bytes += size;
        s.items.push_back(item);
        self.changed.notify_all();
        true
    }

    /// The reader is done.
    pub(crate) fn end(&self) {
        self.lock().ended = true;
        self.changed.notify_all();
    }

    /// The parent is gone: drops what is queued and lets the reader stop.
    pub(crate) fn close(&self) {
        let mut s = self.lock();
        s.closed = true;
        s.items.clear();
        s.bytes = 0;
        self.changed.notify_all();
    }

    /// The next item, waiting at most `wait` for one.
    pub(crate) fn pop(&self, wait: Duration) -> Popped {
        let until = Instant::now().checked_add(wait);
        let mut s = self.lock();
        loop {
            if let Some(item) = s.items.pop_front() {
                s.bytes -= item.size();
                self.changed.notify_all();
                return Popped::Item(item);
            }
            if s.ended {
                return Popped::Ended;
            }
            let left = match until {
                Some(u) => u.saturating_duration_since(Instant::now()),
                None => POLL_SLICE,
            };
            if left.is_zero() {
                return Popped::Empty;
            }
            s = self
                .changed
                .wait_timeout(s, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

/// The tail of a child's stderr, collected by a thread.
#[derive(Debug)]
pub(crate) struct Stderr {
    pub(crate) keep: usize,
    pub(crate) kept: Arc<Mutex<Vec<u8>>>,
    /// `None` once joined, or left to end by itself (a descendant holds the pipe).
    pub(crate) thread: Option<JoinHandle<()>>,
}

impl Stderr {
    pub(crate) fn collect(
        pipe: impl Read + AsRawFd + Send + 'static,
        keep: usize,
        ended: Arc<AtomicBool>,
    ) -> Stderr {
        let kept = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&kept);
        let thread = std::thread::spawn(move || {
            pump(pipe, &ended, |bytes| {
                let mut kept = sink.lock().unwrap_or_else(|p| p.into_inner());
                kept.extend_from_slice(bytes);
                if kept.len() > keep.saturating_mul(2) {
                    let cut = kept.len() - keep;
                    kept.drain(..cut);
                }
                true
            });
        });
        Stderr {
            keep,
            kept,
            thread: Some(thread),
        }
    }
}
