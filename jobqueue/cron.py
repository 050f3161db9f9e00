"""Cron entries: ``schedule()``, "run now", settings reconciliation, and the firing path.

Every fire, scheduled or manual, goes through :func:`fire`: the fire record of (entry, fire
time) and the job commit together, and a fire time that already fired writes nothing. The job's
payload is the entry's payload plus ``fire_time``, the fire time as an ISO 8601 UTC string
(``"2027-03-28T01:00:00+00:00"``), so a handler knows which period it serves; cron handlers
must therefore accept a ``fire_time`` keyword argument (or ``**kwargs``).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError, transaction

from . import arguments
from .arguments import validate_options
from .conf import DEFAULT_CRON_MISSED_CAP, get_settings
from .crontab import InvalidTimezone, Schedule, parse_cron_expression, zone
from .errors import InvalidJobOption, InvalidPayload
from .options import EnqueueOptions, job_type_of
from .payloads import to_json
from .store import NewJob, get_store
from .store.bounded import own_transaction
from .store.cron import Advance, CronStore, DueEntry, Fire, Fired, Leadership

if TYPE_CHECKING:
    from .jobtypes import JobType
    from .models import CronEntry

__all__ = ["fire", "plan", "reconcile_settings", "run_now", "schedule", "validate_entry"]

logger = logging.getLogger("jobqueue.cron")

#: The payload key that carries the fire time to the handler.
FIRE_TIME_KEY = "fire_time"
MISSED_POLICIES = ("once", "skip", "all")
#: Missed fire times counted one by one before the count is extrapolated (a per-second entry
#: down for days would otherwise take seconds to count).
MAX_COUNTED_MISSES = 10_000


def cron_store(using: str | None = None) -> CronStore:
    """Return the store of ``using``, as its cron interface."""
    return get_store(using)


# -- validation ------------------------------------------------------------------------------


def accepts_fire_time(func: Callable[..., Any]) -> bool:
    """Return True if ``func`` can be called with a ``fire_time`` keyword argument."""
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return True  # cannot tell; do not refuse
    return any(
        p.kind is p.VAR_KEYWORD
        or (p.name == FIRE_TIME_KEY and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD))
        for p in params
    )


def check_handler(job_type: str) -> None:
    """Raise ``InvalidJobOption`` if ``job_type`` is registered here and refuses ``fire_time``."""
    from .jobtypes import registered

    found = registered(job_type)
    if found is not None and not accepts_fire_time(found.func):
        raise InvalidJobOption(
            "job_type",
            f"handler {job_type!r} does not accept a {FIRE_TIME_KEY!r} keyword argument; cron "
            f"jobs get the fire time in their payload (add a parameter `{FIRE_TIME_KEY}=None`)",
        )


def validate_entry(
    *,
    name: Any,
    cron_expr: Any,
    job_type: str | JobType,
    queue: Any = "default",
    payload: Any = None,
    timezone: Any = "UTC",
    priority: Any = 0,
    missed: Any = "once",
    missed_cap: Any = DEFAULT_CRON_MISSED_CAP,
    enabled: Any = True,
    handler: bool = False,
    max_payload_bytes: int | None = None,
) -> dict[str, Any]:
    """Check the arguments of :func:`schedule` and return them normalized.

    Args:
        name: the entry's unique name.
        cron_expr: the cron expression.
        job_type: a type name or the object ``@job`` returned.
        queue: the queue name.
        payload: a dict (None: empty), without the reserved ``fire_time`` key.
        timezone: a zone database name.
        priority: -100..100.
        missed: ``once``, ``skip`` or ``all``.
        missed_cap: the most missed times ``all`` runs, >= 1.
        enabled: a bool.
        handler: also check that a locally registered handler accepts ``fire_time``.
        max_payload_bytes: the payload limit; default ``JOBQUEUE["MAX_PAYLOAD_BYTES"]``.

    Raises:
        InvalidCronExpression: the expression does not parse, or never fires.
        InvalidJobOption: a bad name, time zone, queue, job type, priority, missed policy,
            missed_cap or enabled (the message names the option and the value).
        InvalidPayload: the payload is not a JSON object, or holds the reserved ``fire_time``.
    """
    from .jobtypes import JobType

    if not isinstance(name, str) or not name.strip() or len(name) > 200 or "\x00" in name:
        raise InvalidJobOption(
            "name", f"must be a non-empty string of at most 200 characters, got {name!r}"
        )
    expr = parse_cron_expression(cron_expr)
    try:
        zone(timezone)
    except InvalidTimezone as exc:
        raise InvalidJobOption("timezone", str(exc)) from None
    type_name = job_type.name if isinstance(job_type, JobType) else job_type
    if not isinstance(type_name, str) or not type_name or len(type_name) > 200:
        raise InvalidJobOption(
            "job_type", f"must be a non-empty string of at most 200 characters, got {job_type!r}"
        )
    validate_options(queue=queue, priority=priority)
    if queue is None:
        raise InvalidJobOption("queue", "is required")
    if missed not in MISSED_POLICIES:
        raise InvalidJobOption(
            "missed", f"must be one of {', '.join(MISSED_POLICIES)}, got {missed!r}"
        )
    if isinstance(missed_cap, bool) or not isinstance(missed_cap, int) or missed_cap < 1:
        raise InvalidJobOption("missed_cap", f"must be an integer >= 1, got {missed_cap!r}")
    if not isinstance(enabled, bool):
        raise InvalidJobOption("enabled", f"must be True or False, got {enabled!r}")
    payload = {} if payload is None else payload
    if not isinstance(payload, dict):
        raise InvalidJobOption(
            "payload", f"must be a dict of keyword arguments, got {type(payload).__name__}"
        )
    if FIRE_TIME_KEY in payload:
        raise InvalidPayload(
            f"payload[{FIRE_TIME_KEY!r}]", "is reserved: each fire sets it to its fire time"
        )
    if max_payload_bytes is None:
        max_payload_bytes = get_settings().max_payload_bytes
    to_json(payload, max_bytes=max_payload_bytes)
    if handler:
        check_handler(type_name)
    return {
        "name": name,
        "cron_expr": expr,
        "job_type": type_name,
        "queue": queue,
        "payload": payload,
        "timezone": timezone,
        "priority": priority,
        "missed": missed,
        "missed_cap": missed_cap,
        "enabled": enabled,
    }


# -- writing entries -------------------------------------------------------------------------

_SCHEDULE_FIELDS = ("cron_expr", "timezone")
_ENTRY_FIELDS = (
    "cron_expr",
    "timezone",
    "queue",
    "job_type",
    "payload",
    "priority",
    "missed",
    "missed_cap",
    "enabled",
)


def refresh_next_fire(entry: CronEntry, *, was: dict[str, Any] | None, now: datetime) -> None:
    """Set ``entry.next_fire_at`` after a create or an edit (``was``: the old field values).

    A new entry, a changed expression or zone, and a re-enabled entry start from the first
    fire time after ``now`` (nothing missed while disabled is caught up); a disabled entry has
    none. Any other edit keeps the pending fire time.
    """
    if not entry.enabled:
        entry.next_fire_at = None
        return
    changed = was is None or any(was[f] != getattr(entry, f) for f in _SCHEDULE_FIELDS)
    if changed or (was is not None and not was["enabled"]) or entry.next_fire_at is None:
        entry.next_fire_at = Schedule(entry.cron_expr, entry.timezone).next_after(now)


def save_entry(
    values: dict[str, Any], *, source: str, using: str | None = None, replace_other: bool = True
) -> tuple[CronEntry, str]:
    """Create or update the entry named ``values["name"]``; return it and what happened.

    Args:
        values: validated fields (:func:`validate_entry`).
        source: ``settings``, ``code`` or ``admin``; the entry takes it.
        using: database alias.
        replace_other: update an entry of another source (False: leave it, "conflict").

    Returns:
        ``(entry, outcome)`` with outcome ``created``, ``updated``, ``unchanged`` or
        ``conflict``.
    """
    from .models import CronEntry

    alias = using or "default"
    store = cron_store(alias)
    for _ in range(3):
        try:
            with transaction.atomic(using=alias):
                now = store.db_now()
                entry = (
                    CronEntry.objects.using(alias)
                    .select_for_update()
                    .filter(name=values["name"])
                    .first()
                )
                if entry is None:
                    entry = CronEntry(source=source, created_at=now, updated_at=now, **values)
                    refresh_next_fire(entry, was=None, now=now)
                    entry.save(using=alias, force_insert=True)
                    return entry, "created"
                if entry.source != source and not replace_other:
                    return entry, "conflict"
                was = {f: getattr(entry, f) for f in _ENTRY_FIELDS}
                for f in _ENTRY_FIELDS:
                    setattr(entry, f, values[f])
                if was == {f: getattr(entry, f) for f in _ENTRY_FIELDS} and entry.source == source:
                    return entry, "unchanged"
                entry.source = source
                entry.updated_at = now
                refresh_next_fire(entry, was=was, now=now)
                entry.save(using=alias)
                return entry, "updated"
        except IntegrityError:
            continue  # created by a competitor meanwhile: update it
    raise IntegrityError(f"could not save cron entry {values['name']!r}")


def schedule(
    name: str,
    cron_expr: str,
    queue: str,
    job_type: str | JobType,
    payload: dict[str, Any] | None = None,
    *,
    timezone: str = "UTC",
    priority: int = 0,
    missed: str = "once",
    missed_cap: int = DEFAULT_CRON_MISSED_CAP,
    enabled: bool = True,
    using: str | None = None,
) -> CronEntry:
    """Create or update the cron entry ``name``: a job enqueued at every fire time.

    Args:
        name: unique name of the entry (at most 200 characters).
        cron_expr: 5 fields (``minute hour day month weekday``), or 6 with leading seconds;
            ``@daily`` and friends too.
        queue: queue the jobs go to.
        job_type: a registered type name, or the object ``@job`` returned. The handler gets
            the payload plus ``fire_time`` (ISO 8601, UTC).
        payload: a JSON object of the handler's keyword arguments (default ``{}``).
        timezone: zone database name the cron fields are read in (default UTC, whatever
            Django's ``TIME_ZONE``). A skipped local time fires after the gap; a repeated one
            fires in both passes with a ``*`` or ``*/n`` minute or hour, else at the first.
        priority: -100..100, higher runs sooner.
        missed: what to do with fire times missed while no scheduler ran (more than
            ``CRON_GRACE_SECONDS`` late): ``once`` one job for the latest, ``skip`` none,
            ``all`` one per missed time, the latest ``missed_cap`` of them.
        missed_cap: the most missed fire times ``missed="all"`` runs (>= 1).
        enabled: a disabled entry fires nothing; re-enabling starts from the next fire time.
        using: database alias of the queue.

    Returns:
        The saved :class:`~jobqueue.models.CronEntry` (its ``source`` is ``code``).

    Raises:
        InvalidCronExpression, InvalidJobOption, InvalidPayload: bad input (``using`` too);
            nothing is written.
    """
    arguments.alias(using)
    values = validate_entry(
        name=name,
        cron_expr=cron_expr,
        job_type=job_type,
        queue=queue,
        payload=payload,
        timezone=timezone,
        priority=priority,
        missed=missed,
        missed_cap=missed_cap,
        enabled=enabled,
        handler=True,
    )
    from .models import CronSource

    entry, _ = save_entry(values, source=CronSource.CODE, using=using)
    return entry


def reconcile_settings(using: str | None = None) -> dict[str, list[str]]:
    """Make the ``settings`` entries match ``JOBQUEUE["CRON"]`` (runworkers does this at start).

    Creates and updates the entries the setting names, and disables ``settings`` entries it
    no longer names. Entries created in code or in the admin are never touched; a settings
    entry whose name one of them already uses is left out, with a warning.

    Returns:
        Entry names by outcome: ``created``, ``updated``, ``unchanged``, ``disabled``,
        ``conflict``.
    """
    from .models import CronEntry, CronSource

    alias = using or "default"
    report: dict[str, list[str]] = {
        k: [] for k in ("created", "updated", "unchanged", "disabled", "conflict")
    }
    specs = get_settings().cron
    for spec in specs:
        values = {f: getattr(spec, f) for f in ("name", *_ENTRY_FIELDS)}
        entry, outcome = save_entry(
            values, source=CronSource.SETTINGS, using=alias, replace_other=False
        )
        report[outcome].append(entry.name)
        if outcome == "conflict":
            logger.warning(
                "JOBQUEUE['CRON'][%r] left out: an entry of that name was created in %s",
                entry.name,
                entry.source,
            )
    names = [spec.name for spec in specs]
    stale = CronEntry.objects.using(alias).filter(source=CronSource.SETTINGS, enabled=True)
    for entry in stale.exclude(name__in=names):
        entry.enabled = False
        entry.next_fire_at = None
        entry.save(using=alias, update_fields=["enabled", "next_fire_at"])
        report["disabled"].append(entry.name)
    changes = {k: v for k, v in report.items() if v and k != "unchanged"}
    if changes:
        logger.info(
            "cron entries from settings: %s",
            "; ".join(f"{k} {', '.join(v)}" for k, v in changes.items()),
        )
    return report


# -- planning --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """What one scheduler pass does with one entry.

    Attributes:
        fire_times: the fire times to fire, oldest first.
        skipped: missed fire times the policy drops (estimated past ``MAX_COUNTED_MISSES``).
        skipped_from, skipped_to: the first and last missed fire time, when any were missed.
        next_fire_at: the first fire time after this pass.
    """

    fire_times: tuple[datetime, ...]
    skipped: int
    next_fire_at: datetime
    skipped_from: datetime | None = None
    skipped_to: datetime | None = None


def plan(
    schedule: Schedule,
    next_fire_at: datetime | None,
    *,
    missed: str,
    missed_cap: int,
    now: datetime,
    grace_s: float,
    lookahead_s: float = 0.0,
) -> Plan:
    """Decide which fire times to fire now (a pure function of the clock and the entry).

    Fire times from ``next_fire_at`` up to ``now + lookahead_s`` are due. Those later than
    ``now - grace_s`` are on time (a failover or a slow tick made them late, not missed) and
    always fire. Older ones are missed runs, handled by the policy: ``skip`` fires none;
    ``once`` fires the latest of them, unless an on-time fire is due anyway; ``all`` fires the
    latest ``missed_cap`` of them, oldest first.
    """
    horizon = now + timedelta(seconds=lookahead_s)
    if next_fire_at is None:
        return Plan(fire_times=(), skipped=0, next_fire_at=schedule.next_after(now))
    cutoff = now - timedelta(seconds=grace_s)
    tick = timedelta(microseconds=1)
    on_time: list[datetime] = []
    for current in schedule.iter_after(max(next_fire_at - tick, cutoff)):
        if current > horizon:
            following = current
            break
        on_time.append(current)
    first_missed = schedule.next_after(next_fire_at - tick)
    if first_missed > cutoff:
        return Plan(fire_times=tuple(on_time), skipped=0, next_fire_at=following)
    last_missed = schedule.previous_at_or_before(cutoff)
    count = _count(schedule, first_missed, last_missed)
    keep = {"skip": 0, "once": 0 if on_time else 1, "all": missed_cap}[missed]
    kept: list[datetime] = []
    current = last_missed
    while len(kept) < min(keep, count) and current >= first_missed:
        kept.append(current)
        current = schedule.previous_at_or_before(current - tick)
    skipped = count - len(kept)
    return Plan(
        fire_times=(*reversed(kept), *on_time),
        skipped=skipped,
        next_fire_at=following,
        skipped_from=first_missed if skipped else None,
        # The kept ones are the latest: what was dropped ends just before the oldest kept.
        skipped_to=(current if kept else last_missed) if skipped else None,
    )


def _count(schedule: Schedule, first: datetime, last: datetime) -> int:
    """Count fire times in ``[first, last]``; extrapolate past ``MAX_COUNTED_MISSES``."""
    count = 0
    for current in schedule.iter_after(first - timedelta(microseconds=1)):
        if current > last:
            break
        count += 1
        if count == MAX_COUNTED_MISSES:
            span = (current - first).total_seconds()
            if span <= 0:
                break
            return round((count - 1) * (last - first).total_seconds() / span) + 1
    return count


# -- firing ----------------------------------------------------------------------------------


def build_job(entry: DueEntry | CronEntry, fire_time: datetime, now: datetime) -> NewJob:
    """Return the job one fire enqueues: the entry's payload plus ``fire_time``.

    A fire time still ahead of ``now`` (the scheduler fires up to one tick early) becomes the
    job's ``run_at``, so the job starts on time and not before; otherwise it may run now.

    The job type's ``@job(max_attempts=, timeout_s=)`` defaults apply, as for any enqueue
    (:class:`~jobqueue.options.EnqueueOptions`); the entry's own queue and priority are
    explicit options.

    Raises:
        InvalidPayload: the payload no longer fits ``MAX_PAYLOAD_BYTES``.
        InvalidJobOption: the entry's queue or priority is no longer valid.
    """
    conf = get_settings()
    options = EnqueueOptions(queue=entry.queue, priority=entry.priority).resolve(
        job_type_of(entry.job_type)
    )
    payload = {**entry.payload, FIRE_TIME_KEY: fire_time.astimezone(UTC).isoformat()}
    return NewJob(
        queue=options.queue,
        type=entry.job_type,
        payload_json=to_json(payload, max_bytes=conf.max_payload_bytes),
        priority=options.priority,
        run_at=fire_time if fire_time > now else None,
        max_attempts=options.max_attempts,
        timeout_s=options.timeout_s,
    )


class _Refused(Exception):
    """Roll the fire back: the entry moved (another scheduler) or the lease was lost."""

    def __init__(self, leading: bool) -> None:
        self.leading = leading


@dataclass(frozen=True, slots=True, kw_only=True)
class FireOutcome:
    """What :func:`fire` did for one planned step."""

    leading: bool
    advanced: bool
    job_id: int | None


def fire(
    store: CronStore,
    entry: DueEntry,
    fire_time: datetime | None,
    *,
    next_fire_at: datetime,
    skipped: int = 0,
    leader: Leadership | None,
    now: datetime,
    injected_now: datetime | None = None,
    using: str | None = None,
) -> FireOutcome:
    """Fire ``entry`` at ``fire_time`` (None: only advance) and move it to ``next_fire_at``.

    One transaction: the fire record, the job and the compare-and-set of ``next_fire_at``
    (from the ``entry.next_fire_at`` the plan started with) commit together or not at all. A
    fire time that already fired is not an error: the entry still advances past it. The
    transaction is bounded (``store/bounded.py``): the database aborts it if this process
    stalls in it (paused, cut off), so the next leader is not kept waiting on its locks.
    """
    try:
        with own_transaction(using or "default"):
            fired = Fired(leading=True, job_id=None)
            if fire_time is not None:
                fired = store.fire_cron(
                    Fire(
                        entry_id=entry.id,
                        fire_time=fire_time,
                        job=build_job(entry, fire_time, now),
                        fired_by=leader.holder if leader else "",
                        leader=leader,
                        now=injected_now,
                    )
                )
                if not fired.leading:
                    raise _Refused(leading=False)
            advanced = store.advance_cron(
                Advance(
                    entry_id=entry.id,
                    expected=entry.next_fire_at,
                    cron_expr=entry.cron_expr,
                    timezone=entry.timezone,
                    next_fire_at=next_fire_at,
                    last_fired_at=fire_time,
                    skipped=skipped,
                    leader=leader,
                )
            )
            if not advanced:
                raise _Refused(leading=True)
    except _Refused as refused:
        return FireOutcome(leading=refused.leading, advanced=False, job_id=None)
    return FireOutcome(leading=True, advanced=True, job_id=fired.job_id)


def run_now(entry: CronEntry | str, *, fired_by: str = "", using: str | None = None) -> int:
    """Enqueue the entry's job now, through the firing path (a "manual" fire record).

    The fire time is the database clock now; the schedule (``next_fire_at``) is unchanged.

    Returns:
        The new job's id.

    Raises:
        CronEntry.DoesNotExist: no entry has this name.
    """
    from .models import CronEntry

    alias = using or "default"
    if isinstance(entry, str):
        entry = CronEntry.objects.using(alias).get(name=entry)
    store = cron_store(alias)
    with transaction.atomic(using=alias):
        now = store.db_now()
        for attempt in range(3):
            fire_time = now + timedelta(microseconds=attempt)
            fired = store.fire_cron(
                Fire(
                    entry_id=entry.id,
                    fire_time=fire_time,
                    job=build_job(entry, fire_time, fire_time),
                    fired_by=fired_by,
                    manual=True,
                )
            )
            if fired.job_id is not None:
                logger.info(
                    "cron entry %r run now by %s: job %d",
                    entry.name,
                    fired_by or "code",
                    fired.job_id,
                )
                return fired.job_id
    raise IntegrityError(f"cron entry {entry.name!r}: could not record a manual fire")
