"""What a refit channel copies: tensors as spans of device memory (or host memory, for
numpy arrays), the entries that describe a bucket, and how tensors are packed into
buckets."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from .._devipc import Buffer, Runtime, Span, Stream
from ..errors import InvalidArgumentError
from ..torch import current_stream, device_type
from ._line import ALIGN, _is_int

def _dtype_name(obj: Any) -> str:
    dtype = getattr(obj, "dtype", None)
    if dtype is None:
        return "uint8"
    return str(getattr(dtype, "name", dtype)).removeprefix("torch.")


def _shape(obj: Any) -> list[int]:
    shape = getattr(obj, "shape", None)
    return [len(obj)] if shape is None else [int(d) for d in shape]


class _Host:
    """Host memory (a numpy array): copied with ``Stream.write`` / ``Stream.read``."""

    def __init__(self, array: Any, start: int = 0, stop: int | None = None, what: str = "an array"):
        try:
            self.raw = memoryview(array).cast("B")
        except (TypeError, ValueError) as e:
            raise InvalidArgumentError(f"{what} cannot be read as bytes: {e}") from None
        self.array = array
        self.start = start
        self.stop = len(self.raw) if stop is None else stop

    def __len__(self) -> int:
        return self.stop - self.start

    def __getitem__(self, s: slice) -> "_Host":
        start, stop = self.start + s.start, self.start + s.stop
        if not 0 <= start <= stop <= len(self.raw):
            raise InvalidArgumentError(f"bytes {start}..{stop} are outside an array of {len(self.raw)}")
        return _Host(self.array, start, stop)

    def bytes(self) -> memoryview:
        return self.raw[self.start : self.stop]


def _span_of(rt: Runtime, obj: Any, device: int, what: str, writable: bool = False) -> Span | _Host | None:
    """`obj`'s memory (None for 0 bytes): a devipc span or buffer, a contiguous torch
    tensor of the runtime's device type (device memory), or a C-contiguous numpy array
    (host memory, copied in and out with ``Stream.write`` / ``Stream.read``)."""
    if isinstance(obj, Span):
        return obj
    if isinstance(obj, Buffer):
        return obj.span() if len(obj) else None
    module = type(obj).__module__
    if module.startswith("torch") and hasattr(obj, "data_ptr"):
        expected = device_type(rt)
        if obj.device.type != expected:
            raise InvalidArgumentError(
                f"{what} is a {obj.device.type} tensor; this {rt.backend} runtime"
                f"{' (emulated)' if rt.emulated_backend else ''} copies {expected} tensors"
            )
        if not obj.is_contiguous():
            raise InvalidArgumentError(f"{what} is not contiguous (pass .contiguous())")
        nbytes = obj.numel() * obj.element_size()
        index = obj.device.index if obj.device.index is not None else device
        return Span.external(rt, obj.data_ptr(), nbytes, index) if nbytes else None
    if module == "numpy":
        if not obj.flags["C_CONTIGUOUS"]:
            raise InvalidArgumentError(f"{what} is not C-contiguous")
        if writable and not obj.flags["WRITEABLE"]:
            raise InvalidArgumentError(f"{what} is read-only")
        return _Host(obj, what=what) if obj.nbytes else None
    raise InvalidArgumentError(
        f"{what}: expected a torch tensor, a numpy array or a devipc span or buffer, "
        f"got {type(obj).__name__}"
    )


def _framework_stream(rt: Runtime, objs: Iterable[Any]) -> Stream | None:
    """The framework's current stream of the first torch device tensor among `objs`
    (``torch.cuda`` under HIP, ``torch.npu`` on Ascend), wrapped; None when there is
    none (CPU tensors, arrays, devipc memory)."""
    for obj in objs:
        if not (type(obj).__module__.startswith("torch") and hasattr(obj, "device")):
            continue
        if obj.device.type not in ("cuda", "npu"):
            return None
        return current_stream(rt, obj.device.index or 0)
    return None


#: Bytes per element of the dtypes whose entries are checked against their shape.
_ITEMSIZE = {
    "bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "float16": 2, "bfloat16": 2,
    "int32": 4, "uint32": 4, "float32": 4, "int64": 8, "uint64": 8, "float64": 8,
    "complex64": 8, "complex128": 16,
}


@dataclass(frozen=True)
class Entry:
    """One piece of a tensor in a bucket: the tensor's ``name``, ``dtype`` and ``shape``,
    where the piece lies in the bucket (``offset``, ``nbytes``), where it starts in the
    tensor (``start``, bytes) and the tensor's size (``total``, bytes). A tensor that fits
    in one bucket is one entry with ``start == 0`` and ``nbytes == total``."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    offset: int
    nbytes: int
    start: int
    total: int

    @property
    def whole(self) -> bool:
        """Whether the entry is the whole tensor."""
        return self.start == 0 and self.nbytes == self.total

    def to_wire(self) -> list[Any]:
        return [self.name, self.dtype, list(self.shape), self.offset, self.nbytes, self.start, self.total]

    @staticmethod
    def from_wire(raw: Any, bucket_bytes: int) -> "Entry":
        """Parses an entry the producer sent; anything malformed or outside the bucket is
        ``InvalidArgumentError`` (the spans made from it are bounded by the import's real
        size as well)."""
        ok = isinstance(raw, list) and len(raw) == 7
        if ok:
            name, dtype, shape, offset, nbytes, start, total = raw
            ok = (
                isinstance(name, str)
                and isinstance(dtype, str)
                and len(dtype) <= 32
                and isinstance(shape, list)
                and len(shape) <= 64
                and all(_is_int(d) and d < 1 << 62 for d in shape)
                and all(_is_int(x) for x in (offset, nbytes, start, total))
                and offset + nbytes <= bucket_bytes
                and start + nbytes <= total
            )
        if ok and dtype in _ITEMSIZE:
            elements = 1
            for d in shape:
                elements *= d
            ok = elements * _ITEMSIZE[dtype] == total
        if not ok:
            raise InvalidArgumentError(f"the producer described a bucket entry badly: {raw!r:.200}")
        return Entry(name, dtype, tuple(shape), offset, nbytes, start, total)


def _pack(
    items: list[tuple[str, Any, Span | _Host | None]], bucket_bytes: int
) -> list[list[tuple[Entry, Span | _Host | None]]]:
    """Splits the tensors into fills: each a list of (entry, source piece)."""
    fills: list[list[tuple[Entry, Span | _Host | None]]] = [[]]
    used = 0
    for name, obj, src in items:
        total = len(src) if src is not None else 0
        dtype, shape = _dtype_name(obj), tuple(_shape(obj))
        start = 0
        while True:
            used = min(-(-used // ALIGN) * ALIGN, bucket_bytes)
            left = total - start
            # A tensor that fits in a bucket is never split (it can be viewed whole); a
            # larger one fills what is left of the bucket and goes on in the next ones.
            if left and used and (used >= bucket_bytes or bucket_bytes - used < left <= bucket_bytes):
                fills.append([])
                used = 0
            n = min(left, bucket_bytes - used)
            piece = src[start : start + n] if src is not None and n else None
            fills[-1].append((Entry(name, dtype, shape, used, n, start, total), piece))
            used += n
            start += n
            if start >= total:
                break
    return fills if fills[0] else []
