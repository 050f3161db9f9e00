"""Internal: check the arguments of the public functions before any SQL runs.

One rule per kind of argument, used by every public function, so ``ack("1; drop")``,
``heartbeat(10**30, ...)`` and ``retry_many(["abc"])`` are refused alike, with the documented
error, and leave the caller's transaction usable (nothing was sent). The rules themselves are
``validation``'s; this module names the argument and raises the public API's exceptions. Imports
only ``validation``, ``limits``, ``errors``, ``conf`` and Django.

A job id that no row can have (not an integer, below 1, above PostgreSQL's bigint) and a lease
token that is not a UUID name no job and no lease: the function answers as it does for any
missing one (:class:`JobNotFound`, or :class:`LeaseLost` for the functions that act on a lease),
without asking the database; the message says which argument it is ("'x' is not a job id"), not
that a lease was lost.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings as django_settings
from django.db import connections
from django.utils import timezone

from jobqueue import validation
from jobqueue.errors import InvalidJobOption, JobNotFound, LeaseLost
from jobqueue.settings import ranges as limits
from jobqueue.settings.conf import get_settings
from jobqueue.validation import MAX_DELAY_SECONDS, PRIORITY_MAX, PRIORITY_MIN

MAX_ATTEMPTS_LIMIT = 10_000
BIGINT_MAX = 2**63 - 1
"""Largest id a row can have (PostgreSQL ``bigint``; SQLite's integers are the same width)."""


def validate_options(
    *,
    queue: Any = None,
    priority: Any = None,
    max_attempts: Any = None,
    timeout_s: Any = None,
) -> None:
    """Check enqueue options that also appear as ``@job`` defaults. None means "not given".

    Raises:
        InvalidJobOption: naming the option and the bad value.
    """
    if queue is not None:
        queue_name(queue)
    if priority is not None and not validation.is_count(priority, PRIORITY_MIN, PRIORITY_MAX):
        raise InvalidJobOption(
            "priority", f"must be an integer in {PRIORITY_MIN}..{PRIORITY_MAX}, got {priority!r}"
        )
    if max_attempts is not None and not validation.is_count(max_attempts, 1, MAX_ATTEMPTS_LIMIT):
        raise InvalidJobOption(
            "max_attempts", f"must be an integer in 1..{MAX_ATTEMPTS_LIMIT}, got {max_attempts!r}"
        )
    # The range of JOBQUEUE["TIMEOUT_SECONDS"], which a job's own timeout overrides: one range
    # (limits.py) for both, so 1e308 is refused here as it is in the setting (issue 33).
    timeout_range = limits.RANGES["TIMEOUT_SECONDS"]
    if timeout_s is not None and not validation.is_number(
        timeout_s, timeout_range.low, timeout_range.high
    ):
        raise InvalidJobOption(
            "timeout_s", f"must be a number in {timeout_range.describe()}, got {timeout_s!r}"
        )


def queue_name(queue: Any, option: str = "queue") -> str:
    """Return ``queue`` if it is a valid queue name, else raise :class:`InvalidJobOption`."""
    try:
        return validation.validate_queue_name(queue)
    except ValueError as exc:
        raise InvalidJobOption(option, str(exc)) from None


def type_name(name: Any, option: str = "job_type") -> str:
    """Return ``name`` if it is a valid job type name, else raise :class:`InvalidJobOption`."""
    try:
        return validation.validate_type_name(name)
    except ValueError as exc:
        raise InvalidJobOption(option, str(exc)) from None


def dependency_name(name: Any) -> str:
    """Return ``name`` if it is a valid dependency name, else raise :class:`InvalidJobOption`."""
    try:
        return validation.validate_dependency_name(name)
    except ValueError as exc:
        raise InvalidJobOption("name", str(exc)) from None


def seconds(name: str, value: Any, default: float | None = None) -> float:
    """Return ``value`` (``default`` when None) as finite seconds > 0.

    NaN and infinity pass "> 0" but make PostgreSQL fail mid-transaction ("interval out of
    range"), which would abort the caller's transaction instead of giving a clear error.

    Raises:
        InvalidJobOption: naming ``name``.
    """
    number = default if value is None else value
    if not validation.is_number(number, 0, MAX_DELAY_SECONDS, low_open=True):
        raise InvalidJobOption(
            name, f"must be a number of seconds in (0, {MAX_DELAY_SECONDS}], got {value!r}"
        )
    return float(number)


def lease_seconds(lease_s: Any) -> float:
    """Return the lease length, seconds: ``lease_s``, or ``LEASE_SECONDS`` when None."""
    return seconds("lease_s", lease_s, get_settings().lease_seconds)


def text(name: str, value: Any, max_length: int, *, allow_none: bool = False) -> str | None:
    """Return ``value`` if it is a string of at most ``max_length`` characters without NUL.

    Raises:
        InvalidJobOption: naming ``name``.
    """
    if value is None and allow_none:
        return None
    if not validation.is_text(value, max_length):
        raise InvalidJobOption(
            name, f"must be a string of at most {max_length} characters without NUL, got {value!r}"
        )
    return value


def key(name: str, value: Any) -> str | None:
    """Return a dedupe or ordering key: None, or a non-empty string of at most 200 characters.

    An empty key would silently merge unrelated jobs (dedupe) or chain them in one line
    (ordering), so it is refused rather than read as "no key".
    """
    text(name, value, 200, allow_none=True)
    if value == "":
        raise InvalidJobOption(name, "must be a non-empty string, or None for no key")
    return value


def run_at(run_at: Any, delay: Any, name: str = "run_at") -> tuple[datetime | None, float]:
    """Return ``(aware run_at or None, delay seconds)`` from the two exclusive options.

    Raises:
        InvalidJobOption: both given, a non-datetime, a naive datetime under ``USE_TZ``, or a
            delay outside 0..ten years.
    """
    if run_at is not None and delay is not None:
        raise InvalidJobOption(name, "give run_at or delay, not both")
    if run_at is not None:
        if not isinstance(run_at, datetime):
            raise InvalidJobOption(name, f"must be a datetime, got {run_at!r}")
        if timezone.is_naive(run_at):
            if django_settings.USE_TZ:
                raise InvalidJobOption(
                    name,
                    f"{run_at.isoformat()} is naive but USE_TZ is True; pass an aware datetime "
                    "(e.g. django.utils.timezone.now() + timedelta(...))",
                )
            run_at = timezone.make_aware(run_at)
        return run_at, 0.0
    if delay is None:
        return None, 0.0
    if isinstance(delay, timedelta):
        delay_s = delay.total_seconds()
    elif isinstance(delay, int | float) and not isinstance(delay, bool):
        delay_s = float(delay)
    else:
        raise InvalidJobOption("delay", f"must be seconds or a timedelta, got {delay!r}")
    if not validation.is_number(delay_s, 0, MAX_DELAY_SECONDS):
        raise InvalidJobOption(
            "delay", f"must be between 0 and {MAX_DELAY_SECONDS:.0f} seconds, got {delay!r}"
        )
    return None, delay_s


def _is_id(value: Any) -> bool:
    return validation.is_count(value, 1, BIGINT_MAX)


def is_job_id(value: Any) -> bool:
    """Return whether ``value`` is an int some row could have as its id (1..bigint)."""
    return _is_id(value)


def job_id(value: Any) -> int:
    """Return ``value`` as the id of a job for an operator function (cancel, retry, run now).

    Raises:
        JobNotFound: not an integer in 1..bigint: no row can have it.
    """
    if not _is_id(value):
        raise JobNotFound(value)
    return value


def job_ids(values: Any) -> tuple[list[int], list[Any]]:
    """Return ``(ids, impossible)`` from an iterable of job ids, each checked as :func:`job_id`.

    ``impossible`` lists the values no row can have as its id (``"abc"``, ``0``, ``10**30``); the
    caller reports them as missing, as it does ids of rows that do not exist.

    Raises:
        InvalidJobOption: ``values`` is not an iterable (a string is refused, not read
            character by character).
    """
    if isinstance(values, str | bytes | Mapping) or not isinstance(values, Iterable):
        raise InvalidJobOption("job_ids", f"must be an iterable of job ids, got {values!r:.100}")
    ids: list[int] = []
    impossible: list[Any] = []
    for value in values:
        (ids if _is_id(value) else impossible).append(value)
    return ids, impossible


def leased_job_id(value: Any) -> int:
    """Return ``value`` as the id of a leased job (heartbeat, ack, nack).

    Raises:
        LeaseLost: not an integer in 1..bigint: no lease is held under it.
    """
    if not _is_id(value):
        raise LeaseLost(
            value,
            f"{value!r:.100} is not a job id (an integer in 1..{BIGINT_MAX}): "
            "no lease is held under it",
        )
    return value


def lease_token(value: Any, job: Any) -> uuid.UUID:
    """Return ``value`` as the lease token of job ``job``: a UUID, or its text.

    Raises:
        LeaseLost: neither a UUID nor text that parses as one: no lease is held under it.
    """
    if isinstance(value, uuid.UUID):
        return value
    if isinstance(value, str) and len(value) <= 64:
        try:
            return uuid.UUID(value)
        except ValueError:
            pass
    raise LeaseLost(
        job,
        f"{value!r:.100} is not a lease token (a UUID): no lease on job {job!r} is held under it",
    )


def alias(using: Any) -> str:
    """Return the database alias ``using`` names (None: ``"default"``).

    Raises:
        InvalidJobOption: not a string, or not a key of ``DATABASES``.
    """
    name = "default" if using is None else using
    if not isinstance(name, str) or name not in connections.settings:
        raise InvalidJobOption(
            "using",
            f"must be None or a database alias in DATABASES "
            f"({', '.join(sorted(connections.settings))}), got {using!r}",
        )
    return name
