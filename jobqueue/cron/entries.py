"""Internal: cron entries: ``schedule()``, the settings' entries, and the admin's writes.

Validation beyond :mod:`.spec` lives here (a ``@job`` object as the job type, the handler
registered in this process, the ``MAX_PAYLOAD_BYTES`` setting); every write goes through the
store (:class:`~jobqueue.store.cron_entries.CronEntryWrites`), on the caller's database alias.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from typing import Any

from jobqueue import arguments
from jobqueue.errors import InvalidJobOption
from jobqueue.models import CronEntry, CronSource
from jobqueue.registry import JobType, registered
from jobqueue.routing import holds_cron_entry
from jobqueue.settings.conf import get_settings
from jobqueue.settings.cron import DEFAULT_CRON_MISSED_CAP, FIRE_TIME_KEY, accepts_fire_time
from jobqueue.settings.cron import validate_entry as validate_fields
from jobqueue.store import Store, get_store
from jobqueue.store.cron_entries import ENTRY_FIELDS

logger = logging.getLogger("jobqueue.cron")


def cron_store(using: str | None = None) -> Store:
    """Return the store of ``using`` (None: ``default``): ``get_store``, kept for the cron API."""
    return get_store(using)


# -- validation ------------------------------------------------------------------------------


def check_handler(job_type: str) -> None:
    """Raise ``InvalidJobOption`` if ``job_type`` is registered here and refuses ``fire_time``."""
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
    values = validate_fields(
        name=name,
        cron_expr=cron_expr,
        job_type=job_type.name if isinstance(job_type, JobType) else job_type,
        queue=queue,
        payload=payload,
        timezone=timezone,
        priority=priority,
        missed=missed,
        missed_cap=missed_cap,
        enabled=enabled,
        max_payload_bytes=(
            get_settings().max_payload_bytes if max_payload_bytes is None else max_payload_bytes
        ),
    )
    if handler:
        check_handler(values["job_type"])
    return values


# -- writing entries -------------------------------------------------------------------------


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

    Raises:
        IntegrityError: competing creators won three races in a row.
    """
    return cron_store(using).save_cron_entry(values, source=source, replace_other=replace_other)


def edit_entry(entry_id: int, values: dict[str, Any], *, using: str | None = None) -> CronEntry:
    """Set the name and fields of the entry ``entry_id`` (the admin's edit); its source stays.

    A changed expression or zone, and a re-enabled entry, start from the next fire time after
    now; the scheduler's fields (last fire, skipped count) are left as they are.

    Args:
        entry_id: the entry's id.
        values: validated fields (:func:`validate_entry`).
        using: database alias.

    Raises:
        CronEntry.DoesNotExist: no entry has this id.
        IntegrityError: another entry has the new name.
    """
    return cron_store(using).edit_cron_entry(entry_id, values)


def set_enabled(
    entry_ids: Collection[int], enabled: bool, *, using: str | None = None
) -> list[str]:
    """Enable or disable entries; an enabled one starts from its next fire time after now.

    Nothing missed while an entry was disabled is caught up. Entries already so are left.

    Args:
        entry_ids: the entries' ids.
        enabled: the new state.
        using: database alias.

    Returns:
        The names of the entries changed.
    """
    return cron_store(using).set_cron_entries_enabled(entry_ids, enabled)


def delete_entries(entry_ids: Collection[int], *, using: str | None = None) -> list[str]:
    """Delete entries and their fire records (the jobs they enqueued stay).

    An entry declared in ``JOBQUEUE["CRON"]`` comes back at the next worker start.

    Args:
        entry_ids: the entries' ids.
        using: database alias.

    Returns:
        The names of the entries deleted.
    """
    return cron_store(using).delete_cron_entries(entry_ids)


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
    alias = using or "default"
    report: dict[str, list[str]] = {
        k: [] for k in ("created", "updated", "unchanged", "disabled", "conflict")
    }
    # Each entry lives on its queue's alias (routing.py): the other aliases' schedulers disable it.
    specs = [s for s in get_settings().cron if holds_cron_entry(alias, s.queue, s.name)]
    for spec in specs:
        values = {f: getattr(spec, f) for f in ("name", *ENTRY_FIELDS)}
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
    report["disabled"] = cron_store(alias).disable_cron_entries(
        CronSource.SETTINGS, keep=[spec.name for spec in specs]
    )
    changes = {k: v for k, v in report.items() if v and k != "unchanged"}
    if changes:
        logger.info(
            "cron entries from settings: %s",
            "; ".join(f"{k} {', '.join(v)}" for k, v in changes.items()),
        )
    return report
