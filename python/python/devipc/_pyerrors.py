"""Exceptions of devipc's error table raised by the package's Python modules, with the
attributes the extension's own exceptions have (``kind``, ``backend``, ``api``, ``code``,
``name``, ``message``, ``details``)."""

from __future__ import annotations

from typing import Any

from ._devipc import _error_table
from .errors import DevipcError

_KINDS = {row["class"]: row["kind"] for row in _error_table}


def error(cls: type[DevipcError], text: str, **details: Any) -> DevipcError:
    """An exception of class `cls` (one of ``devipc.errors``) with message `text`."""
    e = cls(text)
    e.kind = _KINDS.get(cls.__name__, "invalid_argument")
    e.backend = e.api = e.code = e.name = None
    e.message = text
    e.details = details
    return e
