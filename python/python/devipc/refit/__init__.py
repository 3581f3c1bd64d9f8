"""Weight refit: one producer streams named tensors to N consumers, step after step,
through a persistent staging area of K buckets in device memory, shared once.

Why: RL trainers move their weights into the rollout engines every step. Per-tensor IPC
handles are slow (one vendor import per tensor per step), a fresh bucket per step wastes
memory, and a reused bucket races unless something orders the producer's next write after
every consumer's read. This channel orders it, on the streams, without host synchronisation:

- the producer allocates ``buckets`` x ``bucket_bytes`` of staging memory and, per consumer,
  a *filled* and an *acked* signal (``Signal.post`` / ``Signal.wait_for``, generations);
- per bucket, the producer packs tensors with stream-ordered copies (``Stream.copy_batch``
  from the framework's memory, VMM memory included: the sources are only read by copies,
  never exported), posts *filled* on its stream and sends the bucket's contents (names,
  dtypes, shapes, offsets) to each consumer;
- a consumer's stream waits for that generation, copies out (or the caller reads views), and
  the consumer posts *acked* on its stream;
- the producer refills a bucket only after its stream waited for every live consumer's ack
  of that bucket's previous fill, so the next write cannot overtake a read (the race that
  makes slime allocate a fresh bucket every step cannot happen).

Fill ``f`` (1, 2, ... over the channel's life) uses bucket ``(f - 1) % K`` and is generation
``f`` of every signal. A tensor larger than what is left of a bucket is split across
buckets; ``Consumer.receive`` puts the pieces back together.

Rendezvous and liveness: the producer listens on a Unix socket at ``path`` (the control
channel, one connection per consumer, credentials checked with ``SO_PEERCRED``) and hands
the staging area and the signals out through devipc's rendezvous at ``path + ".share"``
(``SharedBuffer.share``: uid check, grant, tokens). The control connection carries each
bucket's description and tells each side when the other is gone: a consumer that exits or
is killed (``kill -9`` included, in any pid namespace) closes it, and the producer, which
watches it whenever it waits for an ack, drops that consumer, finishes the step for the
others and then raises ``PeerLostError`` naming it; a consumer waiting for the next bucket
of a producer that died gets ``PeerLostError``. Nobody hangs on a dead peer.

Sources and destinations are contiguous: torch tensors in the runtime's device memory
(``cuda`` under HIP, ``npu`` on Ascend; on the emulator ``cpu`` tensors over emulated device
memory, e.g. ``devipc.testing.framework_malloc``), devipc buffers and spans (copied with
``Stream.copy_batch``), or numpy arrays, which are host memory (copied in and out with
``Stream.write`` / ``Stream.read``). A signal carries at most 4 generations in flight, so
``buckets`` is 1 to 4.
"""

from __future__ import annotations

from ._line import ALIGN, MAX_BUCKETS, PROTOCOL
from ._memory import Entry
from .consumer import Bucket, Consumer
from .producer import Producer

__all__ = ["ALIGN", "MAX_BUCKETS", "PROTOCOL", "Bucket", "Consumer", "Entry", "Producer"]
