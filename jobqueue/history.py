"""Internal: build one entry of a job's error history from an exception or a message.

A leaf: the executor, the worker's reaper paths and :func:`jobqueue.nack` all record failures
through :func:`error_entry`, so an entry has one shape wherever the failure was seen.
"""

from __future__ import annotations

import traceback as traceback_module
from typing import Any

from jobqueue.payloads import sanitize_text

__all__ = [
    "ERROR_MESSAGE_CHARS",
    "ERROR_TYPE_CHARS",
    "RESULT_NOT_STORED_KIND",
    "TRACEBACK_TAIL_CHARS",
    "error_entry",
]

TRACEBACK_TAIL_CHARS = 4000
ERROR_MESSAGE_CHARS = 2000
ERROR_TYPE_CHARS = 200


#: The history entry of a job that succeeded but whose handler's return value could not be
#: stored (not JSON, a lone surrogate, an int past Python's digit limit...): its result is null.
RESULT_NOT_STORED_KIND = "result_not_stored"


def _safe_str(value: object) -> str:
    try:
        return str(value)
    except Exception:  # noqa: BLE001 - any __str__ may raise; the type still tells something
        return f"<unprintable {type(value).__qualname__}>"


def error_entry(
    error: BaseException | str, *, attempt: int, worker_id: str = "", kind: str = "error"
) -> dict[str, Any]:
    """Build one error-history entry (type, message, traceback tail), safe for PostgreSQL.

    Never raises: recording a failure must not fail. The message keeps its first
    ``ERROR_MESSAGE_CHARS`` characters, the traceback its last ``TRACEBACK_TAIL_CHARS``, the
    type and its path their first ``ERROR_TYPE_CHARS``; the entry holds text only.
    ``type`` is the exception's qualified name and ``exception_class_path`` its importable path
    (``module.qualname``; empty for a plain message), which the ``django.tasks`` backend reports
    as ``TaskError.exception_class_path``.
    """
    if isinstance(error, BaseException):
        error_type = type(error).__qualname__[:ERROR_TYPE_CHARS]
        error_path = f"{type(error).__module__}.{type(error).__qualname__}"[:ERROR_TYPE_CHARS]
        message = _safe_str(error)
        try:
            tb = "".join(traceback_module.format_exception(error))
        except Exception:  # noqa: BLE001 - a broken __str__ can break formatting too
            tb = f"{error_type}: {message}"
    else:
        error_type, error_path, message, tb = "Error", "", _safe_str(error), ""
    if len(message) > ERROR_MESSAGE_CHARS:
        message = f"{message[:ERROR_MESSAGE_CHARS]}... ({len(message)} characters)"
    tb = tb[-TRACEBACK_TAIL_CHARS:]
    return {
        "kind": kind,
        "attempt": attempt,
        "worker": sanitize_text(worker_id),
        "type": sanitize_text(error_type),
        "exception_class_path": sanitize_text(error_path),
        "message": sanitize_text(message),
        "traceback": sanitize_text(tb),
    }
