"""Type stubs of ``devipc.errors`` (the classes come from the table of error kinds)."""

from typing import Any

class DevipcError(Exception):
    """Base class of every devipc error."""

    kind: str
    """The error kind's stable name: ``vendor``, ``invalid_token``, ``closed``, ..."""
    backend: str | None
    """``"ascend"`` or ``"hip"`` where the error names one."""
    api: str | None
    """The vendor function that failed (``VendorError``)."""
    code: int | None
    """The vendor status code (``VendorError``)."""
    name: str | None
    """The vendor code's symbolic name (``VendorError``)."""
    message: str
    """The vendor's own message (``VendorError``), else the full text."""
    details: dict[str, Any]
    """The kind's other fields (e.g. ``reason`` of ``InvalidTokenError``)."""

class LibraryNotFoundError(DevipcError): ...
class MissingSymbolError(DevipcError): ...
class VendorError(DevipcError): ...
class NoBackendStartedError(DevipcError): ...
class ConfigError(DevipcError): ...
class InvalidTokenError(DevipcError): ...
class BackendMismatchError(DevipcError): ...
class UnsupportedError(DevipcError): ...
class InvalidDeviceError(DevipcError): ...
class DeviceNotVisibleError(DevipcError): ...
class InvalidArgumentError(DevipcError): ...
class UnknownHandleError(DevipcError): ...
class InheritedAcrossForkError(DevipcError): ...
class TimedOutError(DevipcError): ...
class DevipcIOError(DevipcError): ...

class CopyError(DevipcError):
    """A pair of a batch refused when enqueued (its cause is ``__cause__``)."""

    index: int
    """The refused pair's index."""
    count: int
    """How many pairs the batch had."""

class ClosedError(DevipcError): ...
class BufferInUseError(DevipcError): ...
class PeerLostError(DevipcError): ...

__all__ = [
    "DevipcError",
    "LibraryNotFoundError",
    "MissingSymbolError",
    "VendorError",
    "NoBackendStartedError",
    "ConfigError",
    "InvalidTokenError",
    "BackendMismatchError",
    "UnsupportedError",
    "InvalidDeviceError",
    "DeviceNotVisibleError",
    "InvalidArgumentError",
    "UnknownHandleError",
    "InheritedAcrossForkError",
    "TimedOutError",
    "DevipcIOError",
    "CopyError",
    "ClosedError",
    "BufferInUseError",
    "PeerLostError",
]
