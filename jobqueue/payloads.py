"""Internal: turn a payload or a result into canonical JSON, or say exactly what is wrong and where.

The handler receives what a database round trip yields, so we validate and normalize here,
before any SQL runs: tuples become lists, integer keys become strings, and everything JSON cannot
hold faithfully is refused with the path to it (``payload["items"][2]["price"]``).
"""

from __future__ import annotations

import json
import math
from typing import Any

from .errors import InvalidPayload


def _describe(value: Any) -> str:
    kind = type(value)
    return f"{kind.__module__}.{kind.__qualname__}" if kind.__module__ != "builtins" else kind.__name__


def _check_string(text: str, path: str, what: str) -> None:
    if "\x00" in text:
        raise InvalidPayload(path, f"{what} contains a NUL character (\\x00), which PostgreSQL cannot store")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidPayload(path, f"{what} contains a lone surrogate and is not valid Unicode") from None


def _check(value: Any, path: str) -> None:
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidPayload(path, f"{value!r} is not a JSON number")
        return
    if isinstance(value, str):
        _check_string(value, path, "string")
        return
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _check(item, f"{path}[{index}]")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, bool) or not isinstance(key, str | int):
                raise InvalidPayload(
                    f"{path}[{key!r}]", f"key of type {_describe(key)} is not a JSON object key"
                )
            if isinstance(key, str):
                _check_string(key, f"{path}[{key!r}]", "key")
            _check(item, f"{path}[{key!r}]")
        return
    raise InvalidPayload(
        path,
        f"{_describe(value)} is not JSON (convert it first, e.g. a model to its pk, a datetime "
        "to isoformat(), a Decimal to str)",
    )


def to_json(value: Any, *, root: str = "payload", max_bytes: int | None = None) -> str:
    """Return ``value`` as compact JSON text, after checking that JSON holds it faithfully.

    Args:
        value: a JSON-compatible value (dict, list, tuple, str, int, float, bool, None).
        root: the name used at the start of a path in error messages.
        max_bytes: largest accepted size of the UTF-8 encoded JSON, or None for no limit.

    Returns:
        The JSON text.

    Raises:
        InvalidPayload: a value JSON cannot hold (naming its path), a NUL character, a lone
            surrogate, NaN or infinity, or a size over ``max_bytes``.
    """
    _check(value, root)
    text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    if max_bytes is not None:
        size = len(text.encode("utf-8"))
        if size > max_bytes:
            raise InvalidPayload(
                root, f"{size} bytes of JSON is over the limit of {max_bytes} (MAX_PAYLOAD_BYTES)"
            )
    return text


def sanitize_text(text: str) -> str:
    """Return ``text`` storable in PostgreSQL: NUL shown as ``\\x00``, lone surrogates replaced."""
    return text.replace("\x00", "\\x00").encode("utf-8", "replace").decode("utf-8")
