"""Queue specs: the ``name[:weight]`` items of ``JOBQUEUE["QUEUES"]`` and ``runworkers --queues``.

A leaf (imports only ``errors`` and ``validation``): ``conf`` reads the setting with
:func:`parse_queues_setting`, the ``--queues`` flag with :func:`parse_queue_spec`, and
``fairness`` serves the queues by the weights parsed here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from jobqueue.errors import JobQueueConfigurationError
from jobqueue.validation import validate_queue_name

__all__ = [
    "EVERY_QUEUE",
    "MAX_WEIGHT",
    "advertised_queues",
    "parse_queue_spec",
    "parse_queues_setting",
    "serves",
]

#: Largest queue weight: a ratio beyond 1000:1 is a strict order in all but name.
MAX_WEIGHT = 1000

#: ``runworkers --queues`` item meaning every queue not named before it, now and later (never a
#: queue's own name: ``validate_queue_name`` refuses it).
EVERY_QUEUE = "*"

# In a Worker row's queue list, an excluded queue: "!" is no character of a queue name.
_EXCLUDED = "!"

# A ":<number>" suffix is read as a weight, also when the number is bad (":0", ":-1", ":1.5"),
# so a mistyped weight is an error instead of silently becoming part of a queue's name.
_WEIGHT_SUFFIX = re.compile(r"^(?P<name>.+):(?P<weight>[+-]?[0-9]+(?:\.[0-9]*)?)$")


def parse_queue_spec(
    spec: str | Sequence[str], *, every: bool = False
) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """Parse ``"critical:6,default:3,bulk:1"`` (or a list of such items) into names and weights.

    A queue without ``:N`` has weight 1. Queue names may themselves contain ``:``; a name that
    ends in ``:`` and digits (``v2:1``) must be written with its weight (``v2:1:1``). With
    ``every``, the last item may be :data:`EVERY_QUEUE` (``*`` or ``*:N``): every queue not
    named before it, each with that weight (default 1).

    Args:
        spec: comma-separated ``name[:weight]`` items, or a list of them.
        every: accept a last ``*`` item (``runworkers --queues``; not the setting).

    Returns:
        ``(names, weights)`` in the order given.

    Raises:
        ValueError: an empty item, an invalid queue name, a weight that is not a whole number
            from 1 to 1000, a queue named twice, or a ``*`` not allowed or not last; the
            message names the offending item.
    """
    items = [part.strip() for part in spec.split(",")] if isinstance(spec, str) else list(spec)
    if not items or any(not isinstance(item, str) or not item for item in items):
        raise ValueError(
            f"expected comma-separated queues like 'critical:6,default:3,bulk' (name[:weight]), "
            f"got {spec!r}"
        )
    names: list[str] = []
    weights: list[int] = []
    for item in items:
        if item.endswith(":"):
            # Legal in a queue name, but here it is a weight left out ("critical:,bulk").
            raise ValueError(f"queue weight missing after ':' in {item!r}")
        match = _WEIGHT_SUFFIX.match(item)
        name, weight = (match["name"], match["weight"]) if match else (item, "1")
        if not re.fullmatch(r"[0-9]+", weight) or not 1 <= int(weight) <= MAX_WEIGHT:
            raise ValueError(
                f"queue weight must be a whole number from 1 to {MAX_WEIGHT}, got {item!r}"
            )
        if name == EVERY_QUEUE and every and EVERY_QUEUE not in names:
            names.append(name)
        elif name != EVERY_QUEUE or not every:
            names.append(validate_queue_name(name))
        else:
            names.append(name)  # a second "*": reported as named twice below
        weights.append(int(weight))
    if every and EVERY_QUEUE in names[:-1] and names.count(EVERY_QUEUE) == 1:
        raise ValueError(f"'*' must be the last item (every queue not named before it): {spec!r}")
    duplicated = sorted({name for name in names if names.count(name) > 1})
    if duplicated:
        raise ValueError(f"queue named twice in {spec!r}: {', '.join(duplicated)}")
    return tuple(names), tuple(weights)


def advertised_queues(queues: Sequence[str], exclude: Sequence[str] = ()) -> list[str]:
    """Return the queue list a worker writes to its Worker row: ``["a", "*", "!x"]``.

    Args:
        queues: the worker's queue names as given, a last ``*`` included.
        exclude: the queues ``*`` leaves out; written as ``!name``.
    """
    return [*queues, *(_EXCLUDED + name for name in exclude)]


def serves(advertised: Sequence[object], queue: str) -> bool:
    """Return whether a worker whose row lists ``advertised`` claims from ``queue``.

    Args:
        advertised: a Worker row's ``queues`` (:func:`advertised_queues`; non-strings ignored).
        queue: a queue name.
    """
    if queue in advertised:
        return True
    return EVERY_QUEUE in advertised and _EXCLUDED + queue not in advertised


def parse_queues_setting(value: Any) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """Validate ``JOBQUEUE["QUEUES"]``: a list of ``"name"`` or ``"name:weight"`` strings.

    Returns:
        ``(names, weights)``; a name without a weight has weight 1 (:func:`parse_queue_spec`).

    Raises:
        JobQueueConfigurationError: not a non-empty list, or a bad item (the message names it).
    """
    if isinstance(value, str) or not isinstance(value, list | tuple) or not value:
        raise JobQueueConfigurationError(
            f"JOBQUEUE['QUEUES'] must be a non-empty list of queue names, got {value!r}"
        )
    try:
        return parse_queue_spec(list(value))
    except ValueError as exc:
        raise JobQueueConfigurationError(f"JOBQUEUE['QUEUES']: {exc}") from None
