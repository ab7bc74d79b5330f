"""Errors of the library as Python exceptions: one class per ts_status, all TesseraError.

The message is the library's own ts_error text (what was wrong and where); `status` is the
ts_status code and `status_name` its name ("TS_ERR_FORMAT: malformed input").
"""
from __future__ import annotations

from typing import Dict, Type

from ._ffi import ffi, lib, string


class TesseraError(Exception):
    """A call into tessera failed."""

    status: int = -13

    def __init__(self, message: str, status: int = -13) -> None:
        super().__init__(message)
        self.status = status
        self.status_name = string(lib.ts_status_str(status))


class InvalidArgumentError(TesseraError, ValueError):
    """TS_ERR_INVALID_ARG: a bad argument (out of range, unknown name)."""


class OutOfMemoryError(TesseraError, MemoryError):
    """TS_ERR_NOMEM: an allocation failed."""


class TesseraIOError(TesseraError, OSError):
    """TS_ERR_IO: a file could not be opened, read, written or mapped."""


class FormatError(TesseraError, ValueError):
    """TS_ERR_FORMAT: malformed input (a GGUF file, JSON, a template, a grammar)."""


class UnsupportedError(TesseraError):
    """TS_ERR_UNSUPPORTED: well-formed but not supported (type, architecture, feature)."""


class NotFoundError(TesseraError, LookupError):
    """TS_ERR_NOT_FOUND: a key, tensor, token or name does not exist."""


class WrongTypeError(TesseraError, TypeError):
    """TS_ERR_TYPE: a value has another type than asked for."""


class RangeError(TesseraError, ValueError):
    """TS_ERR_RANGE: a value is outside the allowed range."""


class SizeOverflowError(TesseraError, OverflowError):
    """TS_ERR_OVERFLOW: a size computation would overflow."""


class StateError(TesseraError):
    """TS_ERR_STATE: the object is not in a state that allows the call (e.g. closed)."""


class LimitError(TesseraError):
    """TS_ERR_LIMIT: a configured limit was reached (the context length, the queue)."""


class AbortedError(TesseraError):
    """TS_ERR_ABORTED: the operation was cancelled."""


class InternalError(TesseraError):
    """TS_ERR_INTERNAL: a bug in tessera."""


_BY_STATUS: Dict[int, Type[TesseraError]] = {
    -1: InvalidArgumentError,
    -2: OutOfMemoryError,
    -3: TesseraIOError,
    -4: FormatError,
    -5: UnsupportedError,
    -6: NotFoundError,
    -7: WrongTypeError,
    -8: RangeError,
    -9: SizeOverflowError,
    -10: StateError,
    -11: LimitError,
    -12: AbortedError,
    -13: InternalError,
}


def error(status: int, message: str) -> TesseraError:
    """The exception for a status and message."""
    cls = _BY_STATUS.get(int(status), TesseraError)
    return cls(message, int(status))


def check(status: int, err=None, what: str = "") -> None:
    """Raises the exception of a failed call (status != TS_OK), with err's message."""
    if status == 0:
        return
    msg = string(err.msg) if err is not None else ""
    if not msg:
        msg = string(lib.ts_status_str(status))
    if what:
        msg = f"{what}: {msg}"
    raise error(status, msg)


def new_error():
    """A fresh ts_error for one call."""
    return ffi.new("ts_error *")
