"""Circuit breakers per dependency, shared by every worker through the database.

A job type names the service it calls with ``@job(dependency="partner-api")``. Its outcomes feed
that dependency's breaker:

* **closed**: jobs run; failures are counted in a window of ``BREAKER["window_seconds"]``. When
  at least ``failure_threshold`` failed and they are at least ``failure_ratio`` of the window's
  outcomes, the breaker opens for ``cooldown_seconds``.
* **open**: claimed jobs of the dependency are not run. They go back to the queue, spread over
  one base cool-down after the breaker's ``open_until``, with the claim's attempt given back and a
  ``kind: "deferred"`` entry in their history.
* **half-open**: after the cool-down one claimed job becomes the probe (an atomic compare-and-set,
  so two workers never both probe). Its success closes the breaker; its failure reopens it with
  the cool-down doubled, up to ``max_cooldown_seconds``.

A permanent error is the handler's verdict on a job, not on the dependency: it never counts as a
failure. A handler may open the breaker itself with ``RetryAfter(seconds, dependency=...)``;
operators open and close breakers from the admin (:func:`open_breaker`, :func:`close_breaker`).

Internal, except :func:`open_breaker` and :func:`close_breaker`.
"""

from __future__ import annotations

import logging
import random
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta

from django.db import DatabaseError

from jobqueue import arguments
from jobqueue.logging import job_extra
from jobqueue.registry import JobType, registered, registry, resolve
from jobqueue.retries import RunOutcome
from jobqueue.settings.conf import get_settings
from jobqueue.states import DeadReason, JobState
from jobqueue.store import ClaimedJob, Store, get_store
from jobqueue.store.interface import (
    PROBE_FAILED,
    PROBE_NEUTRAL,
    PROBE_OK,
    BreakerOutcomes,
    Deferral,
)
from jobqueue.store.outage import writing

__all__ = ["BreakerGate", "close_breaker", "dependency_of", "open_breaker", "verdict"]

logger = logging.getLogger("jobqueue.breakers")


def dependency_of(job_type: str) -> str | None:
    """Return the dependency ``job_type`` declared (``@job(dependency=...)``), or None.

    Never raises: a type that cannot be resolved has no dependency here, and its run records
    the real error.
    """
    found = registered(job_type)
    if found is None:
        try:
            found = resolve(job_type)
        except Exception:  # noqa: BLE001 - the run itself reports an unknown or broken type
            return None
    return found.dependency


def _dependency(job: ClaimedJob, job_types: Mapping[int, JobType | None] | None) -> str | None:
    """Return the dependency of ``job``.

    From its type already resolved (None: it could not be), else by :func:`dependency_of`.
    """
    if job_types is not None and job.id in job_types:
        found = job_types[job.id]
        return None if found is None else found.dependency
    return dependency_of(job.job_type)


def verdict(outcome: RunOutcome) -> str:
    """Return what ``outcome`` says about the dependency: ``"ok"``, ``"failed"`` or ``"neutral"``.

    Success is ok. A permanent error or an unknown job type is neutral: the dependency may have
    answered fine. Any other failure (an exception, a timeout, a ``RetryAfter``) is failed.
    """
    if outcome.state == JobState.SUCCEEDED:
        return PROBE_OK
    if outcome.dead_reason in (DeadReason.PERMANENT_ERROR, DeadReason.UNKNOWN_TYPE):
        return PROBE_NEUTRAL
    return PROBE_FAILED


class BreakerGate:
    """The worker's side of the breakers: hold back claimed jobs, report outcomes.

    Args:
        store: the queue's store.
        lease_s: the worker's lease, seconds (a probe lapses ``timeout_s + lease_s`` after it
            was claimed, if its outcome never comes).
        rng: random source for spreading deferred jobs (seed it in tests).
    """

    def __init__(self, store: Store, lease_s: float, rng: random.Random | None = None) -> None:
        self.store = store
        self.lease_s = lease_s
        self.rng = rng or random.Random()
        #: Probe jobs this worker holds: job id -> dependency.
        self.probes: dict[int, str] = {}
        # Dependencies whose opening this worker logged, so the log says it once per opening.
        self._reported_open: set[str] = set()

    def admit(
        self,
        claimed: Sequence[ClaimedJob],
        now: datetime | None = None,
        *,
        job_types: Mapping[int, JobType | None] | None = None,
    ) -> list[ClaimedJob]:
        """Return the jobs of ``claimed`` to run; put back those whose breaker holds them.

        One read for all the dependencies in the batch; a probe claim per breaker whose
        cool-down is over; one write for every job put back. A database error lets every job
        run (the breaker fails open: it must never stop work by itself). ``job_types`` (job id
        -> its type, resolved once per run by the worker; None if it could not be) spares
        resolving them here.
        """
        by_dependency: dict[str, list[ClaimedJob]] = defaultdict(list)
        for job in claimed:
            name = _dependency(job, job_types)
            if name is not None:
                by_dependency[name].append(job)
        if not by_dependency:
            return list(claimed)
        try:
            held = self._hold_back(by_dependency, now)
        except DatabaseError as exc:
            logger.error("circuit breakers unavailable (%s); running the jobs", exc)
            return list(claimed)
        return [job for job in claimed if job.id not in held]

    def _hold_back(
        self, by_dependency: dict[str, list[ClaimedJob]], now: datetime | None
    ) -> set[int]:
        breakers = self.store.breaker_states(list(by_dependency), now=now)
        spread_s = get_settings().breaker.cooldown_seconds
        deferrals: list[Deferral] = []
        held_of: set[str] = set()
        for name, jobs in by_dependency.items():
            view = breakers.get(name)
            if view is None or view.state == "closed":
                continue
            waiting = list(jobs)
            # An open breaker has an ``open_until``, a half-open one a ``probe_until`` (the
            # statements that set the state set them); the None checks are for the type only.
            lapse = view.open_until if view.state == "open" else view.probe_until
            if view.state in ("open", "half_open") and lapse is not None and lapse <= view.now:
                first = waiting[0]
                probe_s = first.timeout_s + self.lease_s
                if self.store.claim_probe(name, first.id, probe_s, now=now) is not None:
                    self.probes[first.id] = name
                    waiting.pop(0)
                    logger.warning(
                        "dependency %s: job %s probes it (half-open)",
                        name,
                        first.id,
                        extra=job_extra(first),
                    )
            # Back after the cool-down, spread over one base cool-down: jobs held back together
            # must not come back as one wave (the storm the breaker is there to prevent).
            start = view.open_until if view.state == "open" else view.now
            start = max(start or view.now, view.now)
            if waiting:
                held_of.add(name)
            for job in waiting:
                run_at = start + timedelta(seconds=self.rng.uniform(0.0, spread_s))
                deferrals.append(
                    Deferral(
                        id=job.id,
                        lease_token=job.lease_token,
                        run_at=run_at,
                        message=f"not run: the breaker of dependency {name!r} is "
                        f"{view.state.replace('_', '-')}; back at {run_at.isoformat()}, "
                        "the attempt is not counted",
                    )
                )
        if deferrals:
            self.store.defer_many(deferrals, now=now)
            logger.info(
                "circuit breakers held back %d job(s) of %s",
                len(deferrals),
                ", ".join(sorted(held_of)),
            )
        return {d.id for d in deferrals}

    def observe(
        self,
        runs: Iterable[tuple[ClaimedJob, RunOutcome]],
        now: datetime | None = None,
        *,
        job_types: Mapping[int, JobType | None] | None = None,
    ) -> None:
        """Report a batch of finished runs to their dependencies' breakers (one statement).

        Then open the breakers a ``RetryAfter(dependency=...)`` named. Database errors are
        logged, never raised: the outcomes themselves are recorded by the worker either way.
        ``job_types`` as in :meth:`admit`.
        """
        counts: dict[str, dict[str, int]] = defaultdict(lambda: {"ok": 0, "failed": 0})
        probes: dict[str, tuple[int, str]] = {}
        opens: dict[str, float] = {}
        for claimed, outcome in runs:
            name = _dependency(claimed, job_types)
            if outcome.opens_dependency:
                opens[outcome.opens_dependency] = max(
                    opens.get(outcome.opens_dependency, 0.0), outcome.opens_for_s
                )
            if name is None:
                continue
            result = verdict(outcome)
            # Taken even for a neutral outcome, so a neutral probe still reaches the store.
            tally = counts[name]
            if result != PROBE_NEUTRAL:
                tally[result] += 1
            if self.probes.get(claimed.id) == name:
                del self.probes[claimed.id]
                probes[name] = (claimed.id, result)
        conf = get_settings().breaker
        batch = [
            BreakerOutcomes(
                name=name,
                successes=c["ok"],
                failures=c["failed"],
                probe_job_id=probes.get(name, (None, None))[0],
                probe_result=probes.get(name, (None, None))[1],
            )
            for name, c in counts.items()
        ]
        try:
            if batch:
                states = self.store.record_breaker_outcomes(batch, conf, now=now)
                for name in sorted(counts):
                    if name not in probes and counts[name]["failed"] and states.get(name) == "open":
                        if name not in self._reported_open:
                            logger.warning(
                                "dependency %s: breaker open after %d failure(s) in this batch; "
                                "its jobs are held back for the cool-down",
                                name,
                                counts[name]["failed"],
                            )
                        self._reported_open.add(name)
                    elif states.get(name) == "closed":
                        self._reported_open.discard(name)
                for name, (job_id, result) in probes.items():
                    logger.warning(
                        "dependency %s: probe job %s %s; breaker %s",
                        name,
                        job_id,
                        result,
                        states.get(name, "?"),
                        extra=job_extra(job_id=job_id),
                    )
            for name, seconds in sorted(opens.items()):
                until = self.store.open_breaker(
                    name, seconds, f"RetryAfter({seconds:g} s) from a handler", conf, now=now
                )
                logger.warning("dependency %s: breaker opened until %s", name, until.isoformat())
        except DatabaseError as exc:
            logger.error("could not update circuit breakers: %s", exc)


#: Longest ``reason`` of an open or close (the breaker row's ``reason`` column).
REASON_CHARS = 200


def open_breaker(
    name: str, seconds: float | None = None, *, reason: str = "", using: str | None = None
) -> datetime:
    """Open the breaker of dependency ``name`` for ``seconds`` (default: the max cool-down).

    Jobs of the dependency are held back until then; after that one probe decides. An open
    breaker's cool-down is only ever extended.

    Args:
        name: the dependency, as in ``@job(dependency=...)``.
        seconds: how long, > 0; None means ``BREAKER["max_cooldown_seconds"]``.
        reason: shown in the admin.
        using: database alias of the queue.

    Returns:
        When the cool-down ends (aware datetime, database clock).

    Raises:
        InvalidJobOption: (a ``ValueError``) a bad name, ``seconds`` not a finite number > 0,
            ``reason`` not a string of at most 200 characters without NUL, or ``using`` not
            an alias.
        QueueUnavailable: the database cannot be reached.
    """
    using = arguments.alias(using)
    arguments.dependency_name(name)
    arguments.text("reason", reason, REASON_CHARS)
    conf = get_settings().breaker
    cooldown = arguments.seconds("seconds", seconds, conf.max_cooldown_seconds)
    with writing(using):
        return get_store(using).open_breaker(name, cooldown, reason or "opened by code", conf)


def close_breaker(name: str, *, reason: str = "", using: str | None = None) -> bool:
    """Close the breaker of dependency ``name`` now, and run its held-back jobs now.

    The jobs the breaker held back (``scheduled`` with a ``deferred`` history entry) become
    ``ready`` at once instead of waiting for the cool-down they were pushed to: whoever closes a
    breaker knows the dependency is back. Jobs are found by the job types registered in this
    process with this dependency (``DISCOVER_MODULES`` imports them at startup).

    Returns:
        False when the dependency has no breaker row (it never failed: it is closed).

    Raises:
        InvalidJobOption: (a ``ValueError``) a bad name, ``reason`` not a string of at most 200
            characters without NUL, or ``using`` not an alias.
        QueueUnavailable: the database cannot be reached.
    """
    using = arguments.alias(using)
    arguments.dependency_name(name)
    arguments.text("reason", reason, REASON_CHARS)
    conf = get_settings().breaker
    store = get_store(using)
    types = sorted(t for t, job_type in registry().items() if job_type.dependency == name)
    with writing(using):
        closed = store.close_breaker(name, reason or "closed by code", conf)
        released = store.release_deferred(types)
    if released:
        logger.info("dependency %s: breaker closed; %d held-back job(s) ready now", name, released)
    return closed
