"""Internal: the rules every value from outside meets: names, finite numbers in range, text.

A leaf: it imports nothing of ours, so ``errors``, ``limits`` (the table of setting ranges),
``conf``, ``arguments`` (the checks of the public API) and the models all apply the same rule
without importing each other. Every function raises :class:`ValueError`; callers that owe their
own exception (``InvalidJobOption``, ``JobQueueConfigurationError``) wrap it, keeping the text.
"""

from __future__ import annotations

import math
import re
from typing import Any, TypeGuard

__all__ = [
    "MAX_DELAY_SECONDS",
    "NAME_RULE",
    "PRIORITY_MAX",
    "PRIORITY_MIN",
    "describe_range",
    "is_count",
    "is_number",
    "is_text",
    "number",
    "validate_dependency_name",
    "validate_queue_name",
    "validate_type_name",
]

MAX_DELAY_SECONDS = 10 * 365 * 24 * 3600
"""Longest delay accepted anywhere (enqueue ``delay``, ``RetryAfter``, backoff caps): ten years.

Far beyond any real retry, and far inside what every database's timestamps can hold.
"""

PRIORITY_MIN, PRIORITY_MAX = -100, 100
"""Job priorities, higher first."""

NAME_RULE = "[A-Za-z0-9_.:-]{1,100}"
"""Queue and dependency names (DESIGN.md): safe in a URL, a log line and a NOTIFY channel."""

_NAME = re.compile(NAME_RULE)


def _name(kind: str, value: Any) -> str:
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise ValueError(f"{kind} name must match {NAME_RULE}, got {value!r}")
    return value


def validate_queue_name(value: Any) -> str:
    """Return ``value`` if it is a valid queue name (:data:`NAME_RULE`).

    Raises:
        ValueError: ``queue name must match ..., got <value>``.
    """
    return _name("queue", value)


TYPE_NAME_MAX_LENGTH = 200
"""Longest job type name (``Job.type``)."""

_TYPE_NAME = re.compile(rf"[^\s\x00]{{1,{TYPE_NAME_MAX_LENGTH}}}")


def validate_type_name(value: Any) -> str:
    """Return ``value`` if it is a job type name: 1..200 characters, no whitespace or NUL.

    Type names are dotted paths or ``@job(name=...)`` names, so no narrower rule than the
    column's; whitespace is refused because a name read from a command line never holds it.

    Raises:
        ValueError: ``job type name must be ..., got <value>``.
    """
    if not isinstance(value, str) or not _TYPE_NAME.fullmatch(value):
        raise ValueError(
            f"job type name must be 1..{TYPE_NAME_MAX_LENGTH} characters without whitespace "
            f"or NUL, got {value!r}"
        )
    return value


def validate_dependency_name(value: Any) -> str:
    """Return ``value`` if it is a valid dependency name (the queue-name rule).

    Raises:
        ValueError: ``dependency name must match ..., got <value>``.
    """
    return _name("dependency", value)


def is_number(
    value: Any,
    low: float = -math.inf,
    high: float = math.inf,
    *,
    integer: bool = False,
    low_open: bool = False,
) -> TypeGuard[float]:
    """Tell whether ``value`` is a finite number in ``low..high`` (``(low..high`` if ``low_open``).

    ``True`` and ``False`` are not numbers here (``bool`` is an ``int`` in Python), nor are NaN
    and infinity: they pass a bare comparison and then fail far away, as an interval PostgreSQL
    refuses or a timer that never fires. With ``integer``, only ``int`` values count (``1.0``
    is refused: a count that arrives as a float is a slip worth naming).
    """
    if isinstance(value, bool) or not isinstance(value, int if integer else int | float):
        return False
    if not math.isfinite(value):
        return False
    return (low < value if low_open else low <= value) and value <= high


def is_count(value: Any, low: int = 1, high: float = math.inf) -> TypeGuard[int]:
    """Tell whether ``value`` is an ``int`` (not a bool) in ``low..high``."""
    return is_number(value, low, high, integer=True)


def _plain(value: float) -> str:
    return str(int(value)) if value == int(value) else f"{value:g}"


def describe_range(low: float, high: float, unit: str = "") -> str:
    """Return a range as the docs and error messages write it, e.g. ``1..43200 seconds``."""
    text = f"{_plain(low)}..{_plain(high)}"
    return f"{text} {unit}" if unit else text


def number(
    name: str, value: Any, low: float, high: float, *, integer: bool = False, unit: str = ""
) -> float:
    """Return ``value`` if it is a finite number in ``low..high`` (:func:`is_number`).

    Args:
        name: how the message names the value, e.g. ``JOBQUEUE['LEASE_SECONDS']`` or ``--lease``.
        value: the value given (any type).
        low: smallest value accepted.
        high: largest value accepted.
        integer: accept only whole numbers (``int``).
        unit: the unit the message gives the range in (``"seconds"``), or ``""``.

    Returns:
        The value: an ``int`` with ``integer``, else a ``float``.

    Raises:
        ValueError: ``<name> must be a number in <low>..<high> <unit>, got <value>`` (``an
            integer`` with ``integer``).
    """
    if not is_number(value, low, high, integer=integer):
        kind = "an integer" if integer else "a number"
        within = describe_range(low, high, unit)
        raise ValueError(f"{name} must be {kind} in {within}, got {value!r}")
    return value if integer else float(value)


def is_text(value: Any, max_length: int) -> TypeGuard[str]:
    """Tell whether ``value`` is a string of at most ``max_length`` characters without NUL.

    PostgreSQL ``text`` cannot hold NUL; SQLite can, so without this rule the two stores would
    disagree on what was written.
    """
    return isinstance(value, str) and len(value) <= max_length and "\x00" not in value
