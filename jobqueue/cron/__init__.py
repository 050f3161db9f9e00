"""Cron entries: ``schedule()``, "run now", settings reconciliation, and the firing path.

Every fire, scheduled or manual, goes through :func:`fire` or :func:`run_now`: the fire record
of (entry, fire time) and the job commit together, and a fire time that already fired writes
nothing. The job's payload is the entry's payload plus ``fire_time``, the fire time as an ISO
8601 UTC string (``"2027-03-28T01:00:00+00:00"``), so a handler knows which period it serves;
cron handlers must therefore accept a ``fire_time`` keyword argument (or ``**kwargs``).

One module per job:

- :mod:`.spec`: the rules of an entry's fields (a leaf: ``conf`` checks ``JOBQUEUE["CRON"]``
  with it, without the store);
- :mod:`.entries`: ``schedule()``, the settings' entries, the admin's writes (all through the
  store);
- :mod:`.planning`: which fire times a scheduler pass fires (missed-run policies);
- :mod:`.firing`: one fire and its job;
- :mod:`.scheduler`: the leader service ``runworkers`` runs (lease, ticks; logger
  ``jobqueue.scheduler``).

The names below are re-exported lazily (PEP 562): ``conf`` imports :mod:`.spec` while it is
itself being imported, and an eager import of :mod:`.entries` here would import ``conf`` back.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "DEFAULT_CRON_MISSED_CAP",
    "FIRE_TIME_KEY",
    "MAX_COUNTED_MISSES",
    "MISSED_POLICIES",
    "Advance",
    "DueEntry",
    "Fire",
    "FireOutcome",
    "Fired",
    "Leadership",
    "Plan",
    "Scheduler",
    "accepts_fire_time",
    "build_job",
    "check_handler",
    "cron_store",
    "delete_entries",
    "edit_entry",
    "fire",
    "plan",
    "reconcile_settings",
    "refresh_next_fire",
    "run_now",
    "save_entry",
    "schedule",
    "set_enabled",
    "validate_entry",
]

_LAZY = {
    **dict.fromkeys(
        ("Advance", "DueEntry", "Fire", "Fired", "Leadership"), "jobqueue.store.interface"
    ),
    "refresh_next_fire": "jobqueue.store.cron_entries",
    **dict.fromkeys(
        (
            "check_handler",
            "cron_store",
            "delete_entries",
            "edit_entry",
            "reconcile_settings",
            "save_entry",
            "schedule",
            "set_enabled",
            "validate_entry",
        ),
        "jobqueue.cron.entries",
    ),
    **dict.fromkeys(("FireOutcome", "build_job", "fire", "run_now"), "jobqueue.cron.firing"),
    **dict.fromkeys(("MAX_COUNTED_MISSES", "Plan", "plan"), "jobqueue.cron.planning"),
    "Scheduler": "jobqueue.cron.scheduler",
    **dict.fromkeys(
        ("DEFAULT_CRON_MISSED_CAP", "FIRE_TIME_KEY", "MISSED_POLICIES", "accepts_fire_time"),
        "jobqueue.settings.cron",
    ),
}


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'jobqueue.cron' has no attribute {name!r}")
    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
