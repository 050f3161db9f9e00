"""Internal: turn a payload or a result into canonical JSON, or say exactly what is wrong and where.

The handler receives what a database round trip yields, so we validate and normalize here,
before any SQL runs: tuples become lists, integer keys become strings, and everything JSON cannot
hold faithfully is refused with the path to it (``payload["items"][2]["price"]``).
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from jobqueue.errors import InvalidPayload

MAX_DEPTH = 100
"""Deepest nesting of lists and dicts accepted in a payload or result."""

#: ``json.dumps(ensure_ascii=False, allow_nan=False, separators=(",", ":"))``, made once: those
#: arguments make ``json.dumps`` build a new encoder on every call.
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))

_INT_CHECK_BITS = 2000
"""Ints up to this many bits (about 600 digits) are under any int-to-text limit Python allows."""


def _describe(value: Any) -> str:
    kind = type(value)
    return (
        f"{kind.__module__}.{kind.__qualname__}" if kind.__module__ != "builtins" else kind.__name__
    )


def _check_string(text: str, path: str, what: str) -> None:
    if "\x00" in text:
        raise InvalidPayload(
            path, f"{what} contains a NUL character (\\x00), which PostgreSQL cannot store"
        )
    if text.isascii():  # no surrogate is ASCII: the common case costs no encoding
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidPayload(
            path, f"{what} contains a lone surrogate and is not valid Unicode"
        ) from None


def _check(value: Any, path: str, containing: set[int] | None = None) -> None:
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, int):
        # Python refuses to turn an int of more than sys.get_int_max_str_digits() digits into
        # text (or back, in the worker's json.loads): a plain ValueError naming no path. A bit
        # length this small cannot reach the limit, so most ints cost no conversion here.
        if value.bit_length() > _INT_CHECK_BITS:
            try:
                int.__repr__(value)
            except ValueError:
                raise InvalidPayload(
                    path,
                    f"an integer of about {int(value.bit_length() * 0.30103)} digits is over "
                    f"Python's limit of {sys.get_int_max_str_digits()} digits "
                    "(sys.set_int_max_str_digits); send it as a string",
                ) from None
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidPayload(path, f"{value!r} is not a JSON number")
        return
    if isinstance(value, str):
        _check_string(value, path, "string")
        return
    if isinstance(value, list | tuple | dict):
        # The lists and dicts on the way down from the root: one seen again is a cycle, which
        # would otherwise end in a RecursionError instead of an error naming the path.
        containing = set() if containing is None else containing
        if id(value) in containing:
            raise InvalidPayload(path, "refers back to a list or dict that contains it (a cycle)")
        # `containing` holds the ancestors, so its size is the depth. Deeper JSON would end in a
        # RecursionError here or in json.dumps, not an error naming the path.
        if len(containing) >= MAX_DEPTH:
            raise InvalidPayload(path, f"nested deeper than {MAX_DEPTH} lists or dicts")
        containing.add(id(value))
        try:
            _check_container(value, path, containing)
        finally:
            containing.discard(id(value))
        return
    raise InvalidPayload(
        path,
        f"{_describe(value)} is not JSON (convert it first, e.g. a model to its pk, a datetime "
        "to isoformat(), a Decimal to str)",
    )


def _check_container(value: list | tuple | dict, path: str, containing: set[int]) -> None:
    if not isinstance(value, dict):
        for index, item in enumerate(value):
            _check(item, f"{path}[{index}]", containing)
        return
    # JSON keys are strings, so 1 and "1" would become one key and one value would be lost.
    json_keys: dict[str, Any] = {}
    for key, item in value.items():
        if isinstance(key, bool) or not isinstance(key, str | int):
            raise InvalidPayload(
                f"{path}[{key!r}]", f"key of type {_describe(key)} is not a JSON object key"
            )
        if isinstance(key, str):
            _check_string(key, f"{path}[{key!r}]", "key")
        else:
            # An int key past Python's int-to-text limit cannot be written, nor shown in the
            # path by its repr: the path names it by its size (issue 33).
            _check(key, f"{path}[<an integer key of {key.bit_length()} bits>]", containing)
        json_key = key if isinstance(key, str) else int.__repr__(key)
        if json_key in json_keys:
            raise InvalidPayload(
                f"{path}[{key!r}]",
                f"keys {json_keys[json_key]!r} and {key!r} are the same JSON key {json_key!r}",
            )
        json_keys[json_key] = key
        _check(item, f"{path}[{key!r}]", containing)


#: The value types a flat payload may hold for :func:`_flat_json` (exact types: a subclass of
#: ``str`` or ``int`` may encode differently, so it takes the walk).
_SCALARS = frozenset({str, int, float, bool, type(None)})


def _flat_json(value: Any) -> str | None:
    r"""Return a flat payload's JSON text when the encoder alone proves it faithful, else None.

    A dict of string keys and scalar values (the common payload, ``{"order": 42}``) cannot
    hold a cycle, a too-deep nesting or two keys JSON would merge, and the encoder refuses NaN,
    infinity and an int over Python's digit limit itself; what is left to rule out shows in
    the text: a NUL (escaped as ``\u0000``) and a lone surrogate (not UTF-8). Anything
    else, or any doubt (a string that merely contains ``\u0000``), is None: :func:`_check`
    walks it and names the path of what is wrong.
    """
    if type(value) is not dict:
        return None
    scalars = _SCALARS
    for key, item in value.items():
        if type(key) is not str or type(item) not in scalars:
            return None
    try:
        text = _ENCODER.encode(value)
    except ValueError:
        return None
    if "\\u0000" in text:
        return None
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return None
    return text


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
            surrogate, NaN or infinity, two keys that JSON would merge (``1`` and ``"1"``), a
            cycle, nesting deeper than ``MAX_DEPTH``, or a size over ``max_bytes``.
    """
    text = _flat_json(value)
    if text is None:
        _check(value, root)
        text = _ENCODER.encode(value)
    # UTF-8 takes 1 to 4 bytes a character (lone surrogates were refused): count the bytes only
    # when the text could be over the limit.
    if max_bytes is not None and len(text) * 4 > max_bytes:
        size = len(text) if text.isascii() else len(text.encode("utf-8"))
        if size > max_bytes:
            raise InvalidPayload(
                root, f"{size} bytes of JSON is over the limit of {max_bytes} (MAX_PAYLOAD_BYTES)"
            )
    return text


def normalize(value: Any, path: str) -> Any:
    """Return ``value`` as ``django.utils.json.normalize_json`` makes it, with JSON's keys.

    The values Django's task backends accept as task arguments are accepted, and become what
    they hand the task: a mapping a dict, UTF-8 ``bytes`` text, any other sequence (a tuple) a
    list. Keys become the strings JSON stores (``1`` -> ``"1"``, ``None`` -> ``"null"``), so the
    result is what a database round trip returns. :func:`to_json` still checks what the
    database cannot hold (NUL, NaN, a lone surrogate).

    Args:
        value: the value to normalise.
        path: its name in error messages (``"args"``, ``"kwargs"``).

    Returns:
        The normalised value.

    Raises:
        InvalidPayload: naming the path: a value Django refuses (a TypeError there), ``bytes``
            that are not UTF-8 (a ValueError there), two keys that become one JSON key, or
            nesting deeper than ``MAX_DEPTH`` (a cycle too).
    """
    return _normalize(value, path, 0)


def _normalize(value: Any, path: str, depth: int) -> Any:
    # The order of Django's normalize_json: mappings, bytes, scalars, then other sequences.
    if depth > MAX_DEPTH:
        raise InvalidPayload(path, f"nested deeper than {MAX_DEPTH} lists or dicts (or a cycle)")
    if isinstance(value, Mapping):
        normalized: dict[str, Any] = {}
        for key, item in value.items():
            where = f"{path}[{key!r}]"
            json_key = _json_key(_normalize(key, where, depth + 1), where)
            if json_key in normalized:
                raise InvalidPayload(where, f"two keys are the same JSON key {json_key!r}")
            normalized[json_key] = _normalize(item, where, depth + 1)
        return normalized
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidPayload(
                path, "bytes that are not UTF-8 text (decode them, or send them as base64)"
            ) from None
    if value is None or isinstance(value, str | int | float):
        return value
    if isinstance(value, Sequence):
        return [_normalize(item, f"{path}[{i}]", depth + 1) for i, item in enumerate(value)]
    # Django's own words first ("Unsupported type: <class ...>", normalize_json's TypeError), so
    # code and tests written against Django's backends recognise it; then ours.
    raise InvalidPayload(
        path,
        f"Unsupported type: {type(value)} ({_describe(value)} is not JSON: convert it first, "
        "e.g. a model to its pk, a datetime to isoformat(), a Decimal to str)",
    )


def _json_key(key: Any, path: str) -> str:
    """Return the string JSON makes of a normalised mapping key (as ``json.dumps`` does)."""
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, int | float):  # bool is an int: "true", "false"
        try:
            return json.dumps(key)
        except ValueError:  # an int past Python's int-to-text limit
            raise InvalidPayload(path, "an integer key too long to write as text") from None
    raise InvalidPayload(path, f"key of type {_describe(key)} is not a JSON object key")


def sanitize_text(text: str) -> str:
    r"""Return ``text`` storable in PostgreSQL: NUL shown as ``\\x00``, lone surrogates replaced."""
    return text.replace("\x00", "\\x00").encode("utf-8", "replace").decode("utf-8")
