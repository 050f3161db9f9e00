"""Internal: the outbox's depth as operators see it: metrics families and the health check.

For a queue database ``using``, each other alias of ``OUTBOX_DATABASES`` holds the rows waiting
to be relayed to it (``jobqueue.outbox``). Reads are capped walks of the outbox's
``(target, id)`` index on each of them (``store.outbox_gauges``); an alias that cannot be reached
is reported as down, never failing the scrape or the probe.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import DatabaseError

from jobqueue.settings.conf import get_settings
from jobqueue.store import get_store
from jobqueue.store.interface import OUTBOX_COUNT_CAP

#: Default of the health check's limit: the oldest outbox row may wait this long, seconds. The
#: relay polls every ``OUTBOX_RELAY_INTERVAL_SECONDS`` (0.2 s by default): a minute is a relay
#: that is down or falling behind.
DEFAULT_OUTBOX_MAX_LAG_SECONDS = 60.0


@dataclass(frozen=True, slots=True, kw_only=True)
class OutboxDepth:
    """What waits in one outbox database for one queue database."""

    database: str
    up: bool
    #: Rows waiting (capped at ``OUTBOX_COUNT_CAP``); 0 when down.
    waiting: int = 0
    #: Seconds the oldest row has waited; None when none waits (or down).
    oldest_age_s: float | None = None


def depths(using: str, cap: int = OUTBOX_COUNT_CAP) -> list[OutboxDepth]:
    """Return, per outbox database other than ``using``, what waits there for ``using``.

    Args:
        using: the queue database alias.
        cap: most rows counted per outbox.
    """
    out = []
    for source in get_settings().outbox_databases:
        if source == using:
            continue
        try:
            (gauge,) = get_store(source).outbox_gauges([using], cap)
        except DatabaseError:
            out.append(OutboxDepth(database=source, up=False))
            continue
        out.append(
            OutboxDepth(
                database=source, up=True, waiting=gauge.waiting, oldest_age_s=gauge.oldest_age_s
            )
        )
    return out


def families(using: str) -> list[tuple[str, str, list[tuple[dict[str, str], float]]]]:
    """Return the outbox's metric families for queue database ``using``: (name, help, samples)."""
    found = depths(using)
    return [
        (
            "jobqueue_outbox_rows",
            "Jobs waiting in an outbox (a caller's database) to be relayed to this queue database. "
            f"Exact up to {OUTBOX_COUNT_CAP}; {OUTBOX_COUNT_CAP} means that many or more.",
            [({"outbox_database": d.database}, float(d.waiting)) for d in found],
        ),
        (
            "jobqueue_outbox_oldest_age_seconds",
            "Seconds the oldest job in an outbox has waited for the relay (0 when none waits).",
            [({"outbox_database": d.database}, float(d.oldest_age_s or 0.0)) for d in found],
        ),
        (
            "jobqueue_outbox_up",
            "1 if the outbox database answered this reading, 0 if it could not be reached.",
            [({"outbox_database": d.database}, float(d.up)) for d in found],
        ),
    ]


def lag_check(
    using: str, max_lag_s: float = DEFAULT_OUTBOX_MAX_LAG_SECONDS
) -> tuple[bool, str, dict[str, Any]]:
    """Return the health verdict of the relay to ``using``: ``(ok, sentence, data)``.

    Fails when an outbox database cannot be reached or its oldest row for ``using`` has waited
    longer than ``max_lag_s`` seconds (the relay is down or falls behind).
    """
    found = depths(using)
    late = [d for d in found if d.oldest_age_s is not None and d.oldest_age_s > max_lag_s]
    down = [d.database for d in found if not d.up]
    data: dict[str, Any] = {
        "outbox_waiting": {d.database: d.waiting for d in found},
        "outbox_down": down,
    }
    if down or late:
        parts = [f"{d.database} unreachable" for d in found if not d.up]
        parts += [f"{d.database}: oldest waits {d.oldest_age_s:.0f} s" for d in late]
        return False, f"relay behind ({'; '.join(parts)}; limit {max_lag_s:.0f} s)", data
    if not found:
        return True, "no outbox relays to this database", data
    return True, f"relay keeping up ({sum(d.waiting for d in found)} waiting)", data
