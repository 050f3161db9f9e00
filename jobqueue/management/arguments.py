"""Internal: argparse types shared by jobqueue's management commands.

Each raises ``argparse.ArgumentTypeError`` naming the bad value, so the command exits with
status 2 and a usage line before doing anything.
"""

from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    """Parse an integer >= 1 for argparse."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return value


def seconds(text: str, *, allow_zero: bool = False) -> float:
    """Parse a duration in seconds for argparse."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if (
        value != value
        or value in (float("inf"), float("-inf"))
        or value < 0
        or (value == 0 and not allow_zero)
    ):
        bound = ">= 0" if allow_zero else "> 0"
        raise argparse.ArgumentTypeError(f"expected a number of seconds {bound}, got {text!r}")
    return value


def positive_seconds(text: str) -> float:
    """Parse a duration in seconds > 0."""
    return seconds(text)


def non_negative_seconds(text: str) -> float:
    """Parse a duration in seconds >= 0."""
    return seconds(text, allow_zero=True)


def queue_spec(text: str) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """Parse ``critical:6,default:3,bulk`` into queue names and weights (1 when not given)."""
    from jobqueue.fairness import parse_queue_spec

    try:
        return parse_queue_spec(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


#: Longest worker id: the width of ``Worker.worker_id`` and ``Job.leased_by``.
MAX_WORKER_ID_LENGTH = 200


def worker_id_text(text: str) -> str:
    """Parse a worker id: at most 200 characters, no control characters.

    The id is written to the Worker row and to every claimed job's ``leased_by``. A longer one,
    or one with a NUL, makes each of those writes fail in the database, and the worker would
    retry them forever as if the database were down; refuse it here instead.
    """
    if len(text) > MAX_WORKER_ID_LENGTH:
        raise argparse.ArgumentTypeError(
            f"expected at most {MAX_WORKER_ID_LENGTH} characters, got {len(text)}: {text[:40]!r}..."
        )
    if not text.isprintable():
        raise argparse.ArgumentTypeError(f"expected no control characters, got {text!r}")
    return text
