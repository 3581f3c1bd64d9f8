"""Producer and consumer in two real processes (spawn), on both emulated backends: the
consumer's numpy view is the shared memory itself (no copy), writes flow both ways, and
signals order the two sides."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import devipc
import roles


def test_consumer_sees_the_producers_bytes_without_a_copy_and_writes_back(kind, ctx):
    rt = devipc.Runtime.emulated(kind)
    inbox, outbox = ctx.Queue(), ctx.Queue()
    child = ctx.Process(target=roles.consumer, args=(kind, inbox, outbox))
    child.start()
    try:
        peer = outbox.get(timeout=60)
        assert isinstance(peer, int), peer
        buf = rt.allocate(1 << 16)
        producer_view = np.from_dlpack(buf)
        assert producer_view.shape == (len(buf),) and producer_view.dtype == np.uint8
        producer_view[:5] = np.frombuffer(b"hello", dtype=np.uint8)
        producer_view[-1] = 42
        ready, done = rt.create_signal(), rt.create_signal()
        token = buf.export()
        buf.grant(token, [peer])
        signal_tokens = []
        for s in (ready, done):
            t = s.export()
            s.grant(t, [peer])
            signal_tokens.append(t)
        # Tokens are plain str: they pickle and cross the queue as strings.
        assert pickle.loads(pickle.dumps(token)) == token
        inbox.put((token, *signal_tokens))
        ready.notify()
        got = outbox.get(timeout=60)
        assert got[0] == "seen", got
        assert got[1:3] == (b"hello", 42)
        assert got[3] == 1, "one vendor import in the consumer"
        done.wait(timeout=20)
        # The consumer wrote through its view: the producer's own view sees it.
        assert bytes(producer_view[:5]) == b"world"
        assert buf.read(0, 5) == b"world"
        inbox.put("bye")
        assert outbox.get(timeout=60) == ("closed",)
        child.join(60)
        assert child.exitcode == 0
        del producer_view
        buf.close()
        ready.close()
        done.close()
    finally:
        if child.is_alive():
            child.kill()
            child.join()


def test_copies_accept_bytes_and_buffer_protocol_objects(kind):
    rt = devipc.Runtime.emulated(kind)
    with rt.allocate(4096) as buf:
        buf.write(b"abc")
        buf.write(bytearray(b"def"), offset=3)
        buf.write(memoryview(b"xxghi")[2:], offset=6)
        buf.write(np.arange(4, dtype=np.uint32), offset=16)
        assert buf.read(0, 9) == b"abcdefghi"
        assert np.frombuffer(buf.read(16, 16), dtype=np.uint32).tolist() == [0, 1, 2, 3]
        assert len(buf.read(4000)) == len(buf) - 4000
        # A typed view shows the same bytes in place.
        v = np.from_dlpack(buf.view("uint32", [4], offset=16))
        assert v.tolist() == [0, 1, 2, 3]
        v[1] = 7
        assert np.frombuffer(buf.read(16, 16), dtype=np.uint32).tolist() == [0, 7, 2, 3]
        del v


def test_dlpack_device_is_cpu_on_the_emulator(kind):
    rt = devipc.Runtime.emulated(kind)
    with rt.allocate(64) as buf:
        assert buf.__dlpack_device__() == (1, 0)
        view = buf.view("float32", [2, 2])
        assert view.__dlpack_device__() == (1, 0)
        assert (view.shape, view.strides, view.offset) == ([2, 2], [2, 1], 0)
        del view


def capsule_name(capsule) -> bytes:
    import ctypes

    get = ctypes.pythonapi.PyCapsule_GetName
    get.restype, get.argtypes = ctypes.c_char_p, [ctypes.py_object]
    return get(capsule)


def test_dlpack_protocol_abis_and_refusals(kind):
    rt = devipc.Runtime.emulated(kind)
    buf = rt.allocate(4096)
    # Legacy consumers (no max_version) get a "dltensor" capsule, DLPack 1.x consumers a
    # "dltensor_versioned" one.
    legacy = buf.__dlpack__()
    versioned = buf.__dlpack__(max_version=(1, 0))
    assert capsule_name(legacy) == b"dltensor"
    assert capsule_name(versioned) == b"dltensor_versioned"
    # An unconsumed capsule still holds the buffer; dropping it releases it.
    with pytest.raises(devipc.errors.BufferInUseError):
        buf.close()
    del legacy, versioned
    # No copies and no other device: the memory is only ever exported in place.
    with pytest.raises(BufferError):
        buf.__dlpack__(copy=True)
    with pytest.raises(BufferError):
        buf.__dlpack__(dl_device=(2, 0))
    buf.close()
