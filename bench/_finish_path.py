"""What the finish-path benches share: a trigger switched on and off from its migration's SQL,
a drain timed by statement, interleaved rounds, and their figures.

``bench/finish_notify.py`` (the finished-notify trigger of 0013) and ``bench/parents_cost.py``
(the settle trigger of 0015) measure the same way: jobs drained in this one process by
``claim`` of 100 and ``finish_many`` of 100 acks (no handler, no worker: only the store's
statements), rounds of each kind interleaved so a drift of the machine's load hits both.
Django must be set up before these run (they take the connection and the store as arguments).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterator, Sequence
from typing import Any

from jobqueue.store.finishing import ack_outcome

#: Jobs per claim and per finish_many call.
BATCH = 100


def set_trigger(connection: Any, drop_sql: str, create_sql: str, on: bool) -> None:
    """Drop a migration's trigger and, if ``on``, create it again (``connection``: Django's)."""
    with connection.cursor() as cursor:
        cursor.execute(drop_sql)
        if on:
            cursor.execute(create_sql)


def drain(store: Any, queue: str) -> tuple[float, float, int]:
    """Claim and ack every job of ``queue``, :data:`BATCH` at a time.

    Returns:
        (seconds in ``claim``, seconds in ``finish_many``, jobs acked).
    """
    claim_s = finish_s = 0.0
    acked = 0
    while True:
        t0 = time.perf_counter()
        jobs = store.claim([queue], "bench", BATCH, 60.0)
        t1 = time.perf_counter()
        if not jobs:
            return claim_s, finish_s, acked
        store.finish_many([ack_outcome(j.id, j.lease_token, "null") for j in jobs])
        claim_s += t1 - t0
        finish_s += time.perf_counter() - t1
        acked += len(jobs)


def interleaved(kinds: Sequence[Any], rounds: int) -> Iterator[Any]:
    """Yield each of ``kinds`` ``rounds`` times, every other round in reverse order."""
    for r in range(rounds):
        yield from (kinds if r % 2 == 0 else tuple(reversed(kinds)))


def spread(values: Sequence[float]) -> str:
    """Return ``"median (min-max)"`` of ``values``, one decimal."""
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"
