"""The framework-neutral core of tensor sharing: a ``Descriptor`` (token per allocation,
dtype, shape, strides and byte offset per tensor), grouping by allocation on the
producer side, and the rebuild through DLPack on the consumer side.

Front ends (``devipc.arrays`` for numpy, ``devipc.torch``) say where each tensor lives
(``Placed``) and which ``from_dlpack`` rebuilds it; this module does the rest, so that
every tensor of one allocation travels through one token (one vendor handle) and the
consumer makes one import per allocation, however many tensors.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Iterable, Sequence

from ._devipc import Runtime
from .errors import InvalidArgumentError

#: Element types a descriptor may carry (numpy / torch names).
DTYPES = frozenset(
    [
        "bool",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "float16",
        "float32",
        "float64",
        "bfloat16",
        "complex64",
        "complex128",
    ]
)

#: The descriptor format this module writes and reads.
FORMAT = 1


@dataclass(frozen=True)
class TensorSpec:
    """One tensor of a descriptor: which allocation (index into
    ``Descriptor.allocations``), its dtype name, shape and strides (elements) and its
    offset in bytes from the start of the allocation's exported range."""

    alloc: int
    dtype: str
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int


@dataclass(frozen=True)
class Descriptor:
    """Tensors to rebuild in another process: one token string per allocation and a
    ``TensorSpec`` per tensor. Plain data: it pickles (``multiprocessing`` queues) and
    converts to JSON (``to_json`` / ``from_json``) for other channels."""

    allocations: tuple[str, ...]
    tensors: tuple[TensorSpec, ...]

    def to_json(self) -> str:
        """The descriptor as a JSON string."""
        return json.dumps(
            {
                "format": FORMAT,
                "allocations": list(self.allocations),
                "tensors": [
                    [t.alloc, t.dtype, list(t.shape), list(t.strides), t.offset]
                    for t in self.tensors
                ],
            }
        )

    @staticmethod
    def from_json(text: str) -> "Descriptor":
        """Parses ``to_json``'s output; anything else is ``InvalidArgumentError``."""
        try:
            data = json.loads(text)
            if data.get("format") != FORMAT:
                raise ValueError(f"format {data.get('format')!r}, expected {FORMAT}")
            tensors = tuple(
                TensorSpec(a, d, tuple(s), tuple(st), o)
                for a, d, s, st, o in data["tensors"]
            )
            desc = Descriptor(tuple(data["allocations"]), tensors)
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as e:
            # RecursionError: JSON nested deeper than the interpreter's recursion limit.
            raise InvalidArgumentError(f"not a devipc tensor descriptor: {e}") from None
        desc.check()
        return desc

    def check(self) -> None:
        """Checks the descriptor's shape (types, indices, dtypes): a malformed one is
        ``InvalidArgumentError``. Bounds are checked when each view is made."""

        def bad(why: str) -> InvalidArgumentError:
            return InvalidArgumentError(f"invalid tensor descriptor: {why}")

        if not isinstance(self.allocations, tuple) or not all(
            isinstance(t, str) for t in self.allocations
        ):
            raise bad("allocations must be a tuple of token strings")
        if not isinstance(self.tensors, tuple):
            raise bad("tensors must be a tuple")
        for i, t in enumerate(self.tensors):
            if not isinstance(t, TensorSpec):
                raise bad(f"tensor {i} is not a TensorSpec")
            if not _is_int(t.alloc) or not 0 <= t.alloc < len(self.allocations):
                raise bad(f"tensor {i} names allocation {t.alloc!r}")
            if t.dtype not in DTYPES:
                raise bad(f"tensor {i} has dtype {t.dtype!r}")
            if not all(_is_int(x) for x in (*t.shape, *t.strides, t.offset)):
                raise bad(f"tensor {i} has non-integer shape, strides or offset")
            if len(t.shape) != len(t.strides):
                raise bad(f"tensor {i}: shape and strides differ in length")


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


@dataclass(frozen=True)
class Placed:
    """Where a tensor lives, as a front end found it: ``key`` names its allocation (equal
    keys: one allocation, one token), ``offset`` is in bytes from the start of what
    ``export(key)`` exports."""

    key: Hashable
    dtype: str
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int


def describe(placed: Iterable[Placed], export: Callable[[Hashable], str]) -> Descriptor:
    """Groups ``placed`` by allocation and calls ``export(key)`` once per allocation (it
    exports and grants, returning the token string)."""
    index: dict[Hashable, int] = {}
    tokens: list[str] = []
    specs: list[TensorSpec] = []
    for p in placed:
        if p.dtype not in DTYPES:
            raise InvalidArgumentError(f"unsupported dtype {p.dtype!r} for sharing")
        if p.key not in index:
            index[p.key] = len(tokens)
            tokens.append(export(p.key))
        specs.append(
            TensorSpec(index[p.key], p.dtype, tuple(p.shape), tuple(p.strides), p.offset)
        )
    return Descriptor(tuple(tokens), tuple(specs))


def rebuild(
    rt: Runtime,
    desc: Descriptor,
    from_dlpack: Callable[[Any], Any],
    device: int = 0,
) -> list[Any]:
    """Imports each allocation of ``desc`` once on ``device`` and rebuilds every tensor
    with ``from_dlpack`` over a typed view (zero-copy). The tensors keep their
    allocation mapped for as long as they live."""
    if not isinstance(desc, Descriptor):
        raise InvalidArgumentError(f"expected a devipc Descriptor, got {type(desc).__name__}")
    desc.check()
    buffers = [rt.import_buffer(token, device) for token in desc.allocations]
    views = _views(buffers, desc.tensors)
    return [from_dlpack(v) for v in views]


def _views(buffers: Sequence[Any], specs: Sequence[TensorSpec]) -> list[Any]:
    return [
        buffers[t.alloc].view(t.dtype, list(t.shape), list(t.strides), t.offset)
        for t in specs
    ]
