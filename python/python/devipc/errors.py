"""devipc's exceptions: ``DevipcError`` (also at the package root) and one subclass per
error kind.

The classes are made by the extension from devipc's table of error kinds (the Rust
``ErrorKind``: each kind's stable name, numeric code, class name, parent and docstring),
plus two kinds of the Python objects themselves: ``ClosedError`` (an object used after
``close()``) and ``BufferInUseError`` (closing a buffer that DLPack views still use).
Every exception has the attributes ``kind`` (the kind's stable name, e.g.
``"invalid_token"``), ``backend``, ``api``, ``code``, ``name`` and ``message`` (the
vendor fields of a ``VendorError``; ``None`` elsewhere, except ``message``, which is the
full text otherwise) and ``details`` (a dict of the kind's other fields). A ``CopyError``
(a pair of ``Stream.copy_batch`` refused when enqueued) also has ``index`` (that pair)
and ``count`` (the batch's length); its cause is its ``__cause__``.

``errors.pyi`` declares the same classes for type checkers (a test keeps them equal).
"""

from ._devipc import _errors

globals().update(_errors)

__all__ = list(_errors)

del _errors
