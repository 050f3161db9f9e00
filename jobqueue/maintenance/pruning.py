"""Internal: delete finished jobs past their retention, in bounded batches.

``prune_jobs`` is what ``manage.py prunejobs`` runs; :class:`Pruner` is the same work as a worker
service (``name``, ``interval_s``, ``run_once``) for the leader to run on a schedule with the
``RETENTION`` setting. Each batch is one bounded ``DELETE … WHERE id IN (SELECT … LIMIT n FOR
UPDATE SKIP LOCKED)``, so several pruners at once share the rows instead of waiting on each other,
and no batch holds locks for long. A batch also deletes the parent links whose child it deletes,
and then the ``jobqueue_batch`` rows it left done with no member (``Store.prune``).

The worker-row pruner (:class:`WorkerRowPruner`, a worker service) forgets workers that died
without saying so: their rows, not their jobs (the reaper takes those back).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from django.db.models import BigIntegerField, TextField
from django.db.models.functions import Cast, Now

from jobqueue.models.metrics import (
    LAST_PRUNE,
    LOOP_STALL_MS_PREFIX,
    LOOP_STALLS_PREFIX,
    RECYCLES,
    GaugeSnapshot,
)
from jobqueue.settings import ranges as limits
from jobqueue.settings.conf import get_settings
from jobqueue.states import FINISHED
from jobqueue.store import get_store
from jobqueue.store.interface import PRUNE_ROLLUPS_LIMIT

logger = logging.getLogger("jobqueue.pruner")

DEFAULT_PRUNE_BATCH_SIZE = 1000
"""Rows deleted per statement."""

DEFAULT_PRUNE_INTERVAL_SECONDS = 60.0
"""How often the pruner service runs."""

DEFAULT_PRUNE_MAX_BATCHES = 20
"""Most batches per state in one run of the service, so ``run_once`` returns promptly; a backlog
is worked off over the next runs."""


def check_states(states: Iterable[str]) -> list[str]:
    """Return ``states`` as a list if all are finished states, else raise ``ValueError``."""
    states = list(states)
    bad = [state for state in states if state not in FINISHED]
    if not states or bad:
        raise ValueError(
            f"can prune only finished states ({', '.join(sorted(FINISHED))}), "
            f"got {', '.join(map(repr, bad or states)) or 'none'}"
        )
    return states


def prune_jobs(
    states: Iterable[str],
    older_than_s: float,
    *,
    batch_size: int = DEFAULT_PRUNE_BATCH_SIZE,
    max_batches: int | None = None,
    using: str | None = None,
    on_batch: Callable[[int], None] | None = None,
) -> int:
    """Delete jobs in ``states`` that finished more than ``older_than_s`` seconds ago.

    Args:
        states: finished states (``succeeded``, ``cancelled``, ``dead``).
        older_than_s: age by the database clock, seconds (>= 0).
        batch_size: rows per statement; each batch commits on its own (outside a transaction).
        max_batches: stop after this many batches (None: until none are left).
        using: database alias of the queue.
        on_batch: called with each batch's deleted count (progress output).

    Returns:
        How many jobs were deleted.

    Raises:
        ValueError: a state that is not finished, a negative age, or a batch size outside
            1..10,000 (``limits.RANGES["PRUNE_BATCH_SIZE"]``).
    """
    states = check_states(states)
    if older_than_s < 0:
        raise ValueError(f"older_than_s must be >= 0, got {older_than_s!r}")
    limits.check("PRUNE_BATCH_SIZE", batch_size, "batch_size")  # at most 10,000 rows (case 31)
    store = get_store(using)
    total = batches = 0
    while max_batches is None or batches < max_batches:
        deleted = store.prune(states, older_than_s, batch_size)
        batches += 1
        total += deleted
        if on_batch is not None and deleted:
            on_batch(deleted)
        if deleted < batch_size:
            break
    return total


def prune_rollups(*, max_batches: int | None = None, using: str | None = None) -> int:
    """Delete the per-minute rollup rows older than ``ROLLUP_RETENTION_SECONDS``.

    Args:
        max_batches: stop after this many batches of 10,000 rows (None: until none are left).
        using: database alias of the queue.

    Returns:
        How many rows were deleted.
    """
    store = get_store(using)
    keep_s = get_settings().rollup_retention_seconds
    total = batches = 0
    while max_batches is None or batches < max_batches:
        deleted = store.prune_rollups(keep_s, PRUNE_ROLLUPS_LIMIT)
        total += deleted
        batches += 1
        if deleted < PRUNE_ROLLUPS_LIMIT:
            break
    return total


def record_prune(duration_s: float, *, using: str | None = None) -> None:
    """Record that a prune just ended, taking ``duration_s`` seconds (the metrics read it).

    One small row (``GaugeSnapshot`` named :data:`~jobqueue.models.metrics.LAST_PRUNE`), its
    ``computed_at`` the database clock: ``jobqueue_last_prune_duration_seconds`` and
    ``jobqueue_last_prune_timestamp_seconds``. The last writer wins (several pruners: the one
    that ended last).

    Args:
        duration_s: seconds the prune took, at least 0.
        using: database alias of the queue (default ``"default"``).

    Raises:
        ValueError: ``duration_s`` is negative or not finite.
        django.db.Error: the database cannot be reached.
    """
    if not 0.0 <= duration_s < float("inf"):
        raise ValueError(f"duration_s must be a finite number of seconds >= 0, got {duration_s!r}")
    alias = using or "default"
    rows = GaugeSnapshot.objects.using(alias)
    if not rows.filter(name=LAST_PRUNE).update(body=repr(duration_s), computed_at=Now()):
        rows.bulk_create(
            [GaugeSnapshot(name=LAST_PRUNE, body=repr(duration_s), computed_at=Now())],
            ignore_conflicts=True,
        )


def record_recycle(reason: str, *, using: str | None = None) -> None:
    """Count one worker recycle (``jobqueue_worker_recycles_total{reason}``).

    Beside :func:`record_prune`, the other event the metrics read from a small row
    (``GaugeSnapshot`` named ``recycles:<reason>``, its ``body`` the count): created at 0 if
    missing, then one atomic increment, so concurrent recycles all count.

    Args:
        reason: one of :data:`~jobqueue.models.metrics.RECYCLE_REASONS`.
        using: database alias of the worker's queue (default ``"default"``).

    Raises:
        django.db.Error: the database cannot be reached.
    """
    _add_to_counter(f"{RECYCLES}:{reason}", 1, using)


def record_loop_stalls(
    stalls: Mapping[str, tuple[int, float]], *, using: str | None = None
) -> None:
    """Count event-loop stalls (``jobqueue_event_loop_stalls_total{job_type}``, and their time).

    Rows as :func:`record_recycle`'s: ``loop_stalls:<type>`` (the count) and
    ``loop_stall_ms:<type>`` (their length, whole milliseconds), each one atomic increment.

    Args:
        stalls: job type -> (stalls, seconds the loop was held).
        using: database alias of the worker's queue (default ``"default"``).

    Raises:
        django.db.Error: the database cannot be reached.
    """
    for job_type, (n, seconds) in stalls.items():
        _add_to_counter(f"{LOOP_STALLS_PREFIX}{job_type}"[:100], n, using)
        _add_to_counter(f"{LOOP_STALL_MS_PREFIX}{job_type}"[:100], round(seconds * 1000), using)


def _add_to_counter(name: str, amount: int, using: str | None) -> None:
    """Add ``amount`` to the counter row ``name``: created at 0 if missing, then one increment."""
    rows = GaugeSnapshot.objects.using(using or "default")
    rows.bulk_create([GaugeSnapshot(name=name, body="0", computed_at=Now())], ignore_conflicts=True)
    rows.filter(name=name).update(
        body=Cast(Cast("body", BigIntegerField()) + amount, TextField()), computed_at=Now()
    )


def count_prunable(states: Iterable[str], older_than_s: float, *, using: str | None = None) -> int:
    """Return how many jobs :func:`prune_jobs` would delete now."""
    return get_store(using).count_prunable(check_states(states), older_than_s)


@dataclass
class Pruner:
    """The pruner as a worker service: each run deletes what ``RETENTION`` says has expired.

    Args:
        using: database alias of the queue.
        interval_s: seconds between runs.
        batch_size: rows per DELETE.
        max_batches: most batches per state per run.
        retention: state -> seconds (None keeps that state); default ``JOBQUEUE["RETENTION"]``,
            read at each run so a settings change takes effect.
    """

    using: str = "default"
    interval_s: float = DEFAULT_PRUNE_INTERVAL_SECONDS
    batch_size: int = DEFAULT_PRUNE_BATCH_SIZE
    max_batches: int = DEFAULT_PRUNE_MAX_BATCHES
    retention: Mapping[str, float | None] | None = None
    name: str = "pruner"

    def run_once(self) -> dict[str, int]:
        """Prune every state with a retention; return how many jobs of each were deleted.

        The per-minute rollup rows past ``ROLLUP_RETENTION_SECONDS`` go too (logged, not
        counted in the result, which is about jobs).
        """
        started = time.monotonic()
        retention = self.retention or get_settings().retention_seconds
        deleted: dict[str, int] = {}
        for state, seconds in retention.items():
            if seconds is None:
                continue
            deleted[state] = prune_jobs(
                [state],
                seconds,
                batch_size=self.batch_size,
                max_batches=self.max_batches,
                using=self.using,
            )
        rollups = prune_rollups(max_batches=self.max_batches, using=self.using)
        record_prune(time.monotonic() - started, using=self.using)
        if rollups:
            logger.info("pruner: deleted %d rollup row(s)", rollups)
        if any(deleted.values()):
            logger.info(
                "pruner: deleted %s",
                ", ".join(f"{n} {state}" for state, n in deleted.items() if n),
            )
        return deleted


#: A worker row not refreshed for this long (seconds) belongs to a process that died without
#: exiting cleanly; any worker deletes it. Until then the admin shows it as not alive.
WORKER_ROW_RETENTION_S = 3600.0
#: How often each worker looks for such rows, seconds.
WORKER_PRUNE_INTERVAL_S = 60.0


class WorkerRowPruner:
    """Delete the rows of workers silent for :data:`WORKER_ROW_RETENTION_S`: a service.

    Args:
        store: the queue's store.
    """

    name = "worker rows"
    interval_s = WORKER_PRUNE_INTERVAL_S

    def __init__(self, store) -> None:
        self.store = store

    def run_once(self) -> int:
        """Delete the silent workers' rows; return how many.

        Raises:
            DatabaseError: the database is unavailable.
        """
        gone = self.store.prune_workers(WORKER_ROW_RETENTION_S)
        if gone:
            logger.info(
                "removed %d worker row(s) silent for over %.0f s", gone, WORKER_ROW_RETENTION_S
            )
        return gone
