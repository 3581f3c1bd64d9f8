"""devipc: share device memory and signals between processes on Huawei Ascend NPUs (ACL)
and AMD GPUs (HIP), or on devipc's emulator of both (host shared memory, no device).

A producer allocates (``Runtime.allocate``), exports a token string (``export``), grants
the consumer's ``process_id`` and sends the token over any channel (a ``multiprocessing``
queue, a socket, an environment variable); the consumer imports it
(``Runtime.import_buffer``). ``Signal`` orders the two sides. Buffers speak DLPack, so
``numpy.from_dlpack(buf)`` (emulator) or ``torch.from_dlpack(buf)`` sees the memory in
place. ``devipc.arrays`` (numpy) and ``devipc.torch`` share many tensors as one
``Descriptor``, one vendor handle per allocation.

Every error is a ``DevipcError`` (one subclass per kind) with the fields ``kind``,
``backend``, ``api``, ``code``, ``name``, ``message`` and ``details``.
"""

from ._devipc import (
    BackendMismatchError,
    Buffer,
    BufferInUseError,
    ClosedError,
    ConfigError,
    Connected,
    DevipcError,
    DeviceNotVisibleError,
    DevipcIOError,
    ImportedBuffer,
    InheritedAcrossForkError,
    InvalidArgumentError,
    InvalidDeviceError,
    InvalidTokenError,
    LibraryNotFoundError,
    MissingSymbolError,
    NoBackendStartedError,
    Runtime,
    SharedBuffer,
    ShareServer,
    Signal,
    TensorView,
    TimedOutError,
    UnknownHandleError,
    UnsupportedError,
    VendorError,
    doctor,
    token_info,
)
from .tensors import Descriptor, TensorSpec

__all__ = [
    "BackendMismatchError",
    "Buffer",
    "BufferInUseError",
    "ClosedError",
    "ConfigError",
    "Connected",
    "Descriptor",
    "DevipcError",
    "DeviceNotVisibleError",
    "DevipcIOError",
    "ImportedBuffer",
    "InheritedAcrossForkError",
    "InvalidArgumentError",
    "InvalidDeviceError",
    "InvalidTokenError",
    "LibraryNotFoundError",
    "MissingSymbolError",
    "NoBackendStartedError",
    "Runtime",
    "SharedBuffer",
    "ShareServer",
    "Signal",
    "TensorSpec",
    "TensorView",
    "TimedOutError",
    "UnknownHandleError",
    "UnsupportedError",
    "VendorError",
    "doctor",
    "token_info",
]
