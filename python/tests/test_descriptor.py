"""A list of 1,000 array views of one allocation travels as one descriptor: one token,
and the consumer (another process) makes exactly one vendor import to rebuild all of
them, each with the right bytes."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import devipc
import devipc.arrays
import roles
from devipc.tensors import Descriptor, TensorSpec

N = 1000


def make_views(buf):
    """N views of 64 float32 each (8x8, every other one transposed), element i of view k
    equal to k % 251."""
    whole = np.from_dlpack(buf.view("float32", [N, 8, 8]))
    for k in range(N):
        whole[k] = k % 251
    return [whole[k] if k % 2 == 0 else whole[k].T for k in range(N)]


def test_a_thousand_views_of_one_allocation_need_one_import(kind, ctx):
    rt = devipc.Runtime.emulated(kind)
    inbox, outbox = ctx.Queue(), ctx.Queue()
    child = ctx.Process(target=roles.descriptor_consumer, args=(kind, inbox, outbox))
    child.start()
    try:
        peer = outbox.get(timeout=60)
        buf = rt.allocate(N * 64 * 4)
        views = make_views(buf)
        desc = devipc.arrays.share(views, [buf], peers=[peer])
        assert len(desc.allocations) == 1 and len(desc.tensors) == N
        assert desc.tensors[1].strides == (1, 8)
        inbox.put(desc)
        got = outbox.get(timeout=120)
        assert got[0] == "rebuilt", got
        _, count, imports, live, wrong, shapes, elapsed = got
        assert count == N
        assert imports == 1, f"{imports} vendor imports for one allocation"
        assert live == 1
        assert wrong == []
        assert shapes == [(8, 8)]
        print(f"\n{kind}: rebuilt {N} views in {elapsed * 1e3:.1f} ms, "
              f"{elapsed / N * 1e6:.2f} us per tensor")
        inbox.put("bye")
        assert outbox.get(timeout=60) == ("closed", 0)
        child.join(60)
        assert child.exitcode == 0
        del views
        buf.close()
    finally:
        if child.is_alive():
            child.kill()
            child.join()


def test_descriptors_group_by_allocation_and_round_trip(kind):
    rt = devipc.Runtime.emulated(kind)
    a, b = rt.allocate(4096), rt.allocate(4096)
    xs = [np.from_dlpack(a.view("int32", [4], offset=16 * i)) for i in range(3)]
    ys = [np.from_dlpack(b.view("float64", [2, 2], offset=64))]
    desc = devipc.arrays.share([xs[0], ys[0], xs[1], xs[2]], [a, b], any_process=True)
    assert len(desc.allocations) == 2
    assert [t.alloc for t in desc.tensors] == [0, 1, 0, 0]
    assert [t.offset for t in desc.tensors] == [0, 64, 16, 32]
    assert pickle.loads(pickle.dumps(desc)) == desc
    assert Descriptor.from_json(desc.to_json()) == desc
    # Rebuilt in this process (the same-process shortcut): the same memory.
    xs[1][:] = [5, 6, 7, 8]
    back = devipc.arrays.rebuild(rt, desc)
    assert back[2].tolist() == [5, 6, 7, 8]
    assert back[1].shape == (2, 2) and back[1].dtype == np.float64
    del xs, ys, back
    a.close()
    b.close()


def test_malformed_descriptors_are_invalid_argument_errors(kind):
    rt = devipc.Runtime.emulated(kind)
    with rt.allocate(4096) as buf:
        token = buf.export()
        bad = [
            Descriptor((token,), (TensorSpec(1, "float32", (1,), (1,), 0),)),
            Descriptor((token,), (TensorSpec(0, "float99", (1,), (1,), 0),)),
            Descriptor((token,), (TensorSpec(0, "float32", (2,), (1, 1), 0),)),
            Descriptor((token,), (TensorSpec(0, "float32", ("x",), (1,), 0),)),
            # Out of bounds: checked against the imported buffer, not trusted.
            Descriptor((token,), (TensorSpec(0, "float32", (1 << 30,), (1,), 0),)),
            Descriptor((token,), (TensorSpec(0, "float32", (2,), (-1,), 0),)),
            Descriptor((token,), (TensorSpec(0, "float32", (4,), (1,), 2),)),
        ]
        for desc in bad:
            with pytest.raises(devipc.errors.InvalidArgumentError):
                devipc.arrays.rebuild(rt, desc)
        for text in ["", "{}", "[1]", '{"format": 1, "allocations": 3, "tensors": []}']:
            with pytest.raises(devipc.errors.InvalidArgumentError):
                Descriptor.from_json(text)
        with pytest.raises(devipc.errors.InvalidArgumentError):
            devipc.arrays.rebuild(rt, "not a descriptor")
        with pytest.raises(devipc.errors.InvalidTokenError):
            devipc.arrays.rebuild(rt, Descriptor(("garbage",), ()))
