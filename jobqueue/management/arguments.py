"""Internal: argparse types shared by jobqueue's management commands.

Each raises ``argparse.ArgumentTypeError`` naming the bad value, so the command exits with
status 2 and a usage line before doing anything.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from jobqueue.settings import ranges as limits
from jobqueue.settings.queues import parse_queue_spec


def in_range(flag: str) -> Callable[[str], float]:
    """Return an argparse type for ``flag``, checked against the range of the setting it overrides.

    Args:
        flag: the flag, a key of :data:`jobqueue.settings.ranges.FLAGS` (``"--lease"``).

    Returns:
        A function of the flag's text that returns the number (``int`` for counts) or raises
        ``argparse.ArgumentTypeError`` naming the range and the text (NaN, infinity, negative
        and out-of-range values included).
    """
    key = limits.FLAGS[flag]
    limit = limits.RANGES[key]

    def parse(text: str) -> float:
        try:
            value: float = int(text) if limit.integer else float(text)
        except ValueError:
            kind = "a whole number" if limit.integer else "a number"
            raise argparse.ArgumentTypeError(
                f"expected {kind} in {limit.describe()}, got {text!r}"
            ) from None
        try:
            return limits.check(key, value, "value")
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected {limit.describe()} (the range of {key}), got {text!r}"
            ) from None

    parse.__name__ = flag.lstrip("-").replace("-", "_")
    return parse


def queue_spec(text: str) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """Parse ``critical:6,default:3,bulk`` or ``critical:6,*`` into queue names and weights.

    A weight not given is 1; a last ``*`` item means every other queue, now and later.
    """
    try:
        return parse_queue_spec(text, every=True)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def queue_names(text: str) -> tuple[str, ...]:
    """Parse ``bulk,reports``: queue names as ``--queues`` writes them, without weights or ``*``.

    Raises:
        argparse.ArgumentTypeError: an empty or invalid name, a name given twice, or a weight.
    """
    try:
        names, _ = parse_queue_spec(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    weighted = [item.strip() for item in text.split(",") if item.strip() not in names]
    if weighted:
        raise argparse.ArgumentTypeError(f"queue names only, no weights: got {weighted[0]!r}")
    return names


#: Longest worker id: the width of ``Worker.worker_id`` and ``Job.leased_by``.
MAX_WORKER_ID_LENGTH = 200


def worker_id_text(text: str) -> str:
    """Parse a worker id: 1 to 200 characters, not all blank, no control characters.

    The id is written to the Worker row and to every claimed job's ``leased_by``. A longer one,
    or one with a NUL, makes each of those writes fail in the database, and the worker would
    retry them forever as if the database were down; refuse it here instead. An empty or blank
    one names no worker (an empty one was silently replaced by the default): refused too.
    """
    if not text.strip():
        raise argparse.ArgumentTypeError(f"expected a worker id, got {text!r}")
    if len(text) > MAX_WORKER_ID_LENGTH:
        raise argparse.ArgumentTypeError(
            f"expected at most {MAX_WORKER_ID_LENGTH} characters, got {len(text)}: {text[:40]!r}..."
        )
    if not text.isprintable():
        raise argparse.ArgumentTypeError(f"expected no control characters, got {text!r}")
    return text
