"""devipc: share device memory and signals between processes on Huawei Ascend NPUs (ACL)
and AMD GPUs (HIP), or on devipc's emulator of both (host shared memory, no device).

A producer allocates (``Runtime.allocate``), exports a token string (``export``), grants
the consumer's ``process_id`` and sends the token over any channel (a ``multiprocessing``
queue, a socket, an environment variable); the consumer imports it
(``Runtime.import_buffer``). ``Signal`` orders the two sides. Buffers speak DLPack, so
``numpy.from_dlpack(buf)`` (emulator) or ``torch.from_dlpack(buf)`` sees the memory in
place. ``devipc.arrays`` (numpy) and ``devipc.torch`` share many tensors as one
``Descriptor``, one vendor handle per allocation.

Data plane: ``Runtime.create_stream`` (or ``Stream.wrap`` of a framework's stream, given
as an integer) makes a ``Stream``; ``copy(dst, src)``, ``copy_batch([(dst, src), ...])``,
``write(dst, data)`` and ``read(src)`` enqueue copies on it and return a ``Request``
(``is_complete()``, ``wait(timeout)``, ``result()``: a read's bytes) without waiting for
them. ``dst`` / ``src`` are a whole buffer or a ``Span`` (``buf.span(start, stop)``,
``span[a:b]``, ``Span.external`` for framework memory); a request keeps the memory it
copies through alive, so closing a buffer (an import) with a copy in flight is safe, and
dropping an unfinished request returns at once (devipc finishes it in the background).
A batch pair refused when enqueued raises ``devipc.errors.CopyError`` with its ``index``.
``Event`` (``Runtime.create_event``) orders streams (``Stream.record``,
``Stream.wait_event``) and is waited for by the host; ``Signal.notify(stream=...)`` /
``Signal.wait(stream=...)`` order streams of two processes. ``buf.__dlpack__(stream=...)``
orders the copies devipc's streams enqueued on the buffer before the consumer: a device
consumer's stream waits for them (an event each; ``-1``: no synchronisation), and the
emulator's host consumer (``kDLCPU``, ``stream`` must be ``None``) has the producer wait.

Errors: every error is a ``DevipcError`` (here and in ``devipc.errors``), with one
subclass per kind in ``devipc.errors`` (``from devipc.errors import InvalidTokenError``)
and the fields ``kind``, ``backend``, ``api``, ``code``, ``name``, ``message`` and
``details``.

Options: where the Rust API takes an options object, so does Python, with the same name
and defaults, each Rust builder method a keyword argument (``ExportOptions::any_process()``
is ``ExportOptions(any_process=True)``): ``ExportOptions`` (``SharedBuffer.export``,
``Signal.export``, ``Runtime.export_external``), ``AllocateOptions``
(``Runtime.allocate``), ``ShareOptions`` (``SharedBuffer.share``) and ``ConnectOptions``
(``Runtime.connect``; its ``timeout`` defaults to 30 s, as in Rust). The flag
arguments those methods had (``any_process=``, ``io_timeout=``, ``timeout=``,
``wait_for_server=``) stay, keyword-only, as a shorthand for the setting a call most often
needs: pass an options object or flags, not both (``InvalidArgumentError``).

Argument order, the same rule as Rust's: the arguments come in the Rust method's order,
except ``device``. Rust has no default arguments, so its ``device`` is explicit
(``allocate(device, size)``, ``export_external(device, ptr, size, opts)``,
``import(&token, device)``); Python defaults it to 0, and a defaulted parameter must
follow the required ones, so ``device`` comes right after them: ``allocate(size,
device=0)``, ``export_external(ptr, size, device=0)``, ``import_buffer(token,
device=0)``. The options object comes after ``device`` (as ``opts`` comes last in Rust),
the flag shorthands after it, keyword-only.

Test aids (memory allocated as a framework allocates it, for ``export_external`` without
a framework) are in ``devipc.testing``, not on ``Runtime``.
"""

from ._devipc import (
    AllocateOptions,
    Buffer,
    ConnectOptions,
    Connected,
    Event,
    ExportOptions,
    ImportedBuffer,
    Request,
    Runtime,
    SharedBuffer,
    ShareOptions,
    ShareServer,
    Signal,
    Span,
    Stream,
    TensorView,
    doctor,
    token_info,
)
from .errors import DevipcError
from .tensors import Descriptor, TensorSpec

__all__ = [
    "AllocateOptions",
    "Buffer",
    "ConnectOptions",
    "Connected",
    "Descriptor",
    "DevipcError",
    "Event",
    "ExportOptions",
    "ImportedBuffer",
    "Request",
    "Runtime",
    "SharedBuffer",
    "ShareOptions",
    "ShareServer",
    "Signal",
    "Span",
    "Stream",
    "TensorSpec",
    "TensorView",
    "doctor",
    "token_info",
]
