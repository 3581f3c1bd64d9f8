"""The control connection of a refit channel (newline-separated JSON over a Unix
socket, peer credentials from ``SO_PEERCRED``), and the deadlines every wait of the
channel follows."""

from __future__ import annotations

import json
import os
import select
import socket
import stat
import struct
import time
from typing import Any

from .._devipc import _binding_error
from .._pyerrors import error as _error
from ..errors import DevipcError, InheritedAcrossForkError, InvalidArgumentError, TimedOutError

#: Byte alignment of every entry in a bucket.
ALIGN = 256
#: The most buckets a channel may have: the depth of a signal's ring of events.
MAX_BUCKETS = 4
#: The control protocol's version.
PROTOCOL = 1
#: How often (seconds) a waiting side looks at its peers' control connections.
_SLICE = 0.1
#: The longest one consumer's set-up may take in ``Producer.accept`` before it is dropped.
_SETUP = 10.0
#: The longest control message accepted (a bucket of many small tensors is ~100 bytes each).
_MAX_MESSAGE = 64 << 20


#: The longest timeout accepted (the bindings' own limit).
_MAX_TIMEOUT = 1e9


def _peer_lost(text: str, **details: Any) -> DevipcError:
    return _binding_error("peer_lost", text, details)


def _deadline(timeout: float | None) -> float | None:
    """The monotonic deadline `timeout` seconds from now (None: none); anything but a
    number of seconds from 0 to 1e9 is ``InvalidArgumentError``, before anything is done."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 <= timeout <= _MAX_TIMEOUT:
        raise InvalidArgumentError(f"timeout must be None or a number of seconds from 0 to 1e9, not {timeout!r}")
    return time.monotonic() + timeout


class _Guard:
    """What makes a channel end refuse two threads at once and a forked child: each public
    call enters it (``InvalidArgumentError`` if another thread is inside,
    ``InheritedAcrossForkError`` in a child of the process that made the end)."""

    def __init__(self, what: str):
        self.what = what
        self.pid = os.getpid()
        self.busy = False

    def forked(self) -> bool:
        return os.getpid() != self.pid

    def __enter__(self) -> "_Guard":
        if self.forked():
            raise _error(
                InheritedAcrossForkError,
                f"{self.what} was made by process {self.pid}; a forked child cannot use it",
            )
        if self.busy:
            raise InvalidArgumentError(f"{self.what} is in use by another thread: one call at a time")
        self.busy = True
        return self

    def __exit__(self, *args: object) -> bool:
        self.busy = False
        return False


def _left(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def _slice(deadline: float | None) -> float:
    left = _left(deadline)
    return _SLICE if left is None else min(_SLICE, left)


def _expired(deadline: float | None) -> bool:
    return deadline is not None and time.monotonic() >= deadline


def _peer_credentials(sock: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process at the other end of a Unix socket."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", raw)


class _Line:
    """One control connection: newline-separated JSON objects, both ways."""

    def __init__(self, sock: socket.socket, peer: str):
        self.sock = sock
        self.peer = peer
        self.pid, self.uid, _ = _peer_credentials(sock)
        self._buf = b""

    def send(self, msg: dict[str, Any], deadline: float | None = None) -> None:
        """Sends `msg` by `deadline` (``TimedOutError``: a peer that does not read); a peer
        that is gone is ``PeerLostError``."""
        data = json.dumps(msg, separators=(",", ":")).encode() + b"\n"
        try:
            self.sock.settimeout(_left(deadline))
            self.sock.sendall(data, socket.MSG_NOSIGNAL)
        except socket.timeout:
            raise TimedOutError(f"timed out sending to {self.peer} (pid {self.pid}): it does not read") from None
        except OSError as e:
            raise _peer_lost(f"{self.peer} (pid {self.pid}) is gone: {e}", pid=self.pid) from None
        finally:
            try:
                self.sock.settimeout(None)
            except OSError:
                pass

    def goodbye(self) -> None:
        """Says goodbye if the socket takes it at once (never blocks), then closes."""
        try:
            self.sock.setblocking(False)
            self.sock.send(b'{"bye":true}\n', socket.MSG_NOSIGNAL)
        except OSError:
            pass
        self.close()

    def _fill(self, wait: float) -> bool:
        """Reads what arrived within `wait` seconds; False: nothing arrived. The peer's end
        closed is ``PeerLostError``."""
        ready, _, _ = select.select([self.sock], [], [], wait)
        if not ready:
            return False
        try:
            chunk = self.sock.recv(1 << 20)
        except OSError as e:
            raise _peer_lost(f"{self.peer} (pid {self.pid}) is gone: {e}", pid=self.pid) from None
        if not chunk:
            raise _peer_lost(
                f"{self.peer} (pid {self.pid}) is gone: it closed the channel, exited or was killed",
                pid=self.pid,
            )
        self._buf += chunk
        if len(self._buf) > _MAX_MESSAGE and b"\n" not in self._buf:
            raise InvalidArgumentError(f"{self.peer} sent a control message over {_MAX_MESSAGE} bytes")
        return True

    def recv(self, deadline: float | None, waiting_for: str) -> dict[str, Any]:
        """The next message, by `deadline` (``TimedOutError``)."""
        while b"\n" not in self._buf:
            if not self._fill(_slice(deadline)) and _expired(deadline):
                raise TimedOutError(f"timed out waiting for {waiting_for} from {self.peer}")
        line, self._buf = self._buf.split(b"\n", 1)
        try:
            msg = json.loads(line)
        except (ValueError, RecursionError) as e:
            raise InvalidArgumentError(f"{self.peer} sent a malformed control message: {e}") from None
        if not isinstance(msg, dict):
            raise InvalidArgumentError(f"{self.peer} sent a control message that is not an object")
        if msg.get("bye"):
            raise _peer_lost(f"{self.peer} (pid {self.pid}) closed the channel", pid=self.pid, closed=True)
        return msg

    def poll_gone(self) -> bool:
        """Whether the peer is gone (its end closed, or it said goodbye), without waiting."""
        try:
            while self._fill(0):
                pass
        except DevipcError:
            return True
        # After "ready", the only thing a consumer says is goodbye.
        return b"bye" in self._buf

    def close(self) -> None:
        self.sock.close()


def _is_int(x: Any, low: int = 0) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= low


def _listen(path: str, backlog: int) -> socket.socket:
    """A listening Unix socket at `path` (mode 0600); a socket left there by a process
    that is gone is replaced, anything else is refused."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        pass
    else:
        if not stat.S_ISSOCK(st.st_mode):
            raise InvalidArgumentError(f"{path} exists and is not a socket")
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(path)
        except ConnectionRefusedError:
            os.unlink(path)
        except OSError as e:
            raise InvalidArgumentError(f"{path}: {e}") from None
        else:
            raise InvalidArgumentError(f"{path}: another process listens there")
        finally:
            probe.close()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        old = os.umask(0o177)
        try:
            sock.bind(path)
        finally:
            os.umask(old)
        sock.listen(max(backlog, 1))
        sock.setblocking(False)
    except OSError as e:
        sock.close()
        raise InvalidArgumentError(f"cannot listen at {path}: {e}") from None
    return sock


def _connect(path: str, deadline: float | None, uids: set[int]) -> _Line:
    """Connects to the producer's control socket, waiting for it to appear."""
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            # Bounded: a connect to a listener whose backlog is full waits.
            sock.settimeout(max(_slice(deadline), 0.01))
            sock.connect(path)
            sock.settimeout(None)
        except (FileNotFoundError, ConnectionRefusedError, BlockingIOError, socket.timeout) as e:
            sock.close()
            if _expired(deadline):
                raise TimedOutError(f"timed out waiting for a refit producer at {path}: {e}") from None
            time.sleep(_slice(deadline))
            continue
        except OSError as e:
            sock.close()
            raise InvalidArgumentError(f"cannot connect to {path}: {e}") from None
        line = _Line(sock, "the producer")
        if line.uid not in uids:
            line.close()
            raise InvalidArgumentError(
                f"the process at {path} runs as uid {line.uid}, which this consumer does not trust"
            )
        return line
