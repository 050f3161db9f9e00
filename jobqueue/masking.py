r"""Internal: the one masking function every output uses, and terminal-safe text.

Every place that shows a payload, a result, a checkpoint, a batch payload, an error message or a
traceback to a person or a scraper passes it through here: the admin's pages, ``manage.py jobqueue
show``/``jobs``/``batch`` (text and JSON), the worker's log lines (plain and JSON formatters), the
error history as the executor records it, and the metrics' label values. One rule for all
(``JOBQUEUE["ADMIN_MASKED_KEYS"]``, default ``password``, ``token``, ``secret``, ``card``,
``authorization``):

* :func:`mask`: in a JSON value, the value of any key containing a masked name (any depth,
  case-insensitive) becomes :data:`MASK`.
* :func:`mask_text`: in free text, every value :func:`secrets_of` found under a masked key of the
  job's payload or result is replaced wherever it appears, and a value written after a masked key
  name (``token=abc``, ``password: abc``, ``Authorization: Bearer abc``) is replaced.
* :func:`escape_control`: control characters (ESC, BEL, CR, the C1 range, bidi overrides) are
  shown as ``\x1b``-style escapes, so a message cannot retitle, clear or rewrite an operator's
  terminal or forge a log line.

:func:`safe_text` does both to text. See docs/decisions.md, "One masking function" (2026-12-06).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any

from jobqueue.settings.conf import get_settings

__all__ = [
    "MASK",
    "MIN_SECRET_CHARS",
    "escape_control",
    "escape_page",
    "is_masked_key",
    "mask",
    "mask_entry",
    "mask_text",
    "masked_keys",
    "safe_text",
    "secrets_of",
    "unmask",
]

#: What a masked value is shown as, whatever its type.
MASK = "********"
#: Shortest masked value also masked where it appears bare in an error message or traceback;
#: shorter ones ("1", "no") would blank out unrelated text, and stay masked by the key rule.
MIN_SECRET_CHARS = 4

# C0 controls but TAB and LF, DEL, the C1 range (0x9b is a one-character CSI), and the Unicode
# bidi embeddings, overrides and isolates (text that reads differently than it runs).
_CONTROL = [
    *(c for c in range(0x20) if c not in (0x09, 0x0A)),
    0x7F,
    *range(0x80, 0xA0),
    *range(0x202A, 0x202F),
    *range(0x2066, 0x206A),
]
_NAMED = {0x0D: "\\r", 0x0A: "\\n", 0x09: "\\t"}


def _escape_of(code: int) -> str:
    if code in _NAMED:
        return _NAMED[code]
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


_MULTI_LINE = {code: _escape_of(code) for code in _CONTROL}
_ONE_LINE = {**_MULTI_LINE, 0x0A: "\\n"}
# A page keeps CR too: in HTML it is whitespace, and a template may end its lines with CRLF.
_PAGE = {code: text for code, text in _MULTI_LINE.items() if code != 0x0D}


def masked_keys() -> tuple[str, ...]:
    """Return the lower-case key fragments masked everywhere (``ADMIN_MASKED_KEYS``)."""
    return get_settings().admin_masked_keys


def _keys(given: Iterable[str] | None) -> tuple[str, ...]:
    return masked_keys() if given is None else tuple(given)


def is_masked_key(key: Any, keys: Iterable[str]) -> bool:
    """Return True if ``key`` contains any of ``keys`` (case-insensitive)."""
    text = str(key).lower()
    return any(name in text for name in keys)


def mask(value: Any, keys: Iterable[str] | None = None) -> Any:
    """Return a copy of the JSON ``value`` with the values of masked keys replaced, at any depth.

    Args:
        value: a decoded JSON value (dicts, lists, scalars).
        keys: lower-case key fragments; default ``JOBQUEUE["ADMIN_MASKED_KEYS"]``.
    """
    names = _keys(keys)
    if not names:
        return value

    def walk(node: Any) -> Any:
        if isinstance(node, Mapping):
            return {k: MASK if is_masked_key(k, names) else walk(v) for k, v in node.items()}
        if isinstance(node, list | tuple):
            return [walk(item) for item in node]
        return node

    return walk(value)


def secrets_of(*values: Any, keys: Iterable[str] | None = None) -> set[str]:
    """Return the text of every value under a masked key in the JSON ``values``, at any depth.

    Scalars give their text; a dict or list under a masked key gives each of its scalars. Texts
    shorter than :data:`MIN_SECRET_CHARS` are left out (see :func:`mask_text`).

    Args:
        values: decoded JSON values (a job's payload, result, checkpoint).
        keys: lower-case key fragments; default ``JOBQUEUE["ADMIN_MASKED_KEYS"]``.
    """
    names = _keys(keys)
    found: set[str] = set()

    def leaves(node: Any) -> Iterable[Any]:
        if isinstance(node, Mapping):
            for item in node.values():
                yield from leaves(item)
        elif isinstance(node, list | tuple):
            for item in node:
                yield from leaves(item)
        elif node is not None and not isinstance(node, bool):
            yield node

    def walk(node: Any) -> None:
        if isinstance(node, Mapping):
            for key, item in node.items():
                if is_masked_key(key, names):
                    found.update(str(leaf) for leaf in leaves(item))
                else:
                    walk(item)
        elif isinstance(node, list | tuple):
            for item in node:
                walk(item)

    if names:
        for value in values:
            walk(value)
    return {text for text in found if len(text) >= MIN_SECRET_CHARS}


@cache
def _after_key(keys: tuple[str, ...]) -> re.Pattern[str]:
    names = "|".join(re.escape(key) for key in keys)
    return re.compile(
        rf"(?i)([\w.-]*(?:{names})[\w.-]*['\"]?\s*[:=]\s*)"
        # An HTTP scheme ("Bearer abc") is part of the value.
        r"""((?:bearer|basic|token)\s+[^\s'",;)}\]]+|'[^']*'|"[^"]*"|[^\s'",;)}\]]+)"""
    )


def mask_text(text: str, secrets: Iterable[str] = (), keys: Iterable[str] | None = None) -> str:
    """Return an error message, traceback or log line with masked values replaced by :data:`MASK`.

    Two rules (docs/decisions.md, "Masking error messages"): every text in ``secrets`` (from
    :func:`secrets_of` on the job's payload and result) is replaced wherever it appears; and a
    value written after a masked key name, as in ``token=abc``, ``password: abc``,
    ``Authorization: Bearer abc`` or ``{'api_token': 'abc'}``, is replaced up to the next quote,
    space, comma, semicolon or closing bracket.

    Args:
        text: the text shown.
        secrets: values to hide wherever they appear.
        keys: lower-case key fragments; default ``JOBQUEUE["ADMIN_MASKED_KEYS"]``.
    """
    names = _keys(keys)
    if not text or not names:
        return text
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, MASK)
    return _after_key(names).sub(lambda m: m.group(1) + MASK, text)


def escape_control(text: str, *, one_line: bool = False) -> str:
    r"""Return ``text`` with control characters written as escapes (``ESC`` as ``\x1b``).

    ESC, BEL, CR, backspace, DEL, the C1 range and the bidi overrides are escaped; TAB is kept,
    and so is LF unless ``one_line`` (a table cell, a log message: a newline there would forge a
    line).

    Args:
        text: text about to reach a terminal, a log file or a page.
        one_line: escape LF too.
    """
    return text.translate(_ONE_LINE if one_line else _MULTI_LINE)


def escape_page(html: str) -> str:
    r"""Return a rendered page with control characters (but TAB, LF, CR) written as escapes.

    Markup never holds them, so only text read from the database changes: a job type holding
    ``ESC[2J`` or a tenant holding a bidi override shows as ``[2J`` or ``‮``.

    Args:
        html: the page's text.
    """
    return html.translate(_PAGE)


def safe_text(
    text: Any,
    secrets: Iterable[str] = (),
    *,
    one_line: bool = False,
    keys: Iterable[str] | None = None,
) -> str:
    """Return ``text`` masked (:func:`mask_text`) and with control characters escaped.

    Args:
        text: the text shown (anything: ``str()`` of it).
        secrets: values to hide wherever they appear (:func:`secrets_of`).
        one_line: escape LF too (:func:`escape_control`).
        keys: lower-case key fragments; default ``JOBQUEUE["ADMIN_MASKED_KEYS"]``.
    """
    return escape_control(mask_text(str(text), secrets, keys), one_line=one_line)


def mask_entry(entry: Mapping[str, Any], secrets: Iterable[str] = ()) -> dict[str, Any]:
    """Return an error-history entry with its message and traceback masked (:func:`mask_text`).

    Args:
        entry: one entry of a job's ``errors`` (``jobqueue.history.error_entry``).
        secrets: values to hide wherever they appear (:func:`secrets_of`).
    """
    out = dict(entry)
    for field in ("message", "traceback"):
        if isinstance(out.get(field), str):
            out[field] = mask_text(out[field], secrets)
    return out


def unmask(submitted: Any, stored: Any, keys: Iterable[str] | None = None) -> Any:
    """Return ``submitted`` with each :data:`MASK` under a masked key put back from ``stored``.

    A form showed :func:`mask`'s copy; a value the user left as ``********`` keeps what was
    stored at the same path. A new key whose value is ``********`` keeps that text.
    """
    names = _keys(keys)

    def walk(node: Any, old: Any) -> Any:
        if isinstance(node, dict):
            before = old if isinstance(old, dict) else {}
            return {
                k: before[k]
                if v == MASK and is_masked_key(k, names) and k in before
                else walk(v, before.get(k))
                for k, v in node.items()
            }
        if isinstance(node, list):
            before_list = old if isinstance(old, list) else []
            return [
                walk(item, before_list[i] if i < len(before_list) else None)
                for i, item in enumerate(node)
            ]
        return node

    return walk(submitted, stored)
