"""The pgqueuer consumer the peer benchmark starts with ``pgq run pgq_app:main``: one asyncpg
connection, ``PgQueuer(AsyncpgDriver(...))`` and one no-op entrypoint, as in pgqueuer's quick
start. pgqueuer 1.6's ``pgq run`` wants the factory as an async context manager (it says so when
given the README's plain coroutine), so the connection is closed on the way out.

``bench/shapes.py`` uses two more entrypoints, each registered only when asked for, so that the
consumer is otherwise the peers bench's: ``stamp`` (when ``PGQ_STAMP_FILE`` is set) appends
``"<key> <time.time()>"`` to that file as the handler starts (a job's start is the handler's wall
time, as for jobqueue's ``bench.shape_jobs.stamp``), and ``keyed`` (when ``PGQ_KEYED`` is set)
sleeps 50 ms with pgqueuer's own ``concurrency_limit=2`` (its closest equivalent of a
concurrency key). Any entrypoint with a limit switches every dequeue of the consumer to
pgqueuer's capacity-gated statement (``build_dequeue_query``: slot CTEs), a heavier one, which
is why ``keyed`` is not registered for the other figures.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
from pgqueuer import PgQueuer
from pgqueuer.db import AsyncpgDriver
from pgqueuer.models import Job

#: How long a ``keyed`` job runs (seconds), and how many run at once across all consumers.
KEYED_SLEEP_S = 0.05
KEYED_LIMIT = 2


@asynccontextmanager
async def main() -> AsyncIterator[PgQueuer]:
    """Yield a PgQueuer with the no-op entrypoint, on PEERS_DATABASE_URL."""
    connection = await asyncpg.connect(os.environ["PEERS_DATABASE_URL"])
    stamp_file = os.environ.get("PGQ_STAMP_FILE")
    try:
        pgq = PgQueuer(AsyncpgDriver(connection))

        @pgq.entrypoint("noop")
        async def noop(job: Job) -> None:
            """Do nothing (pgqueuer)."""

        if stamp_file:

            @pgq.entrypoint("stamp")
            async def stamp(job: Job) -> None:
                """Record the handler's start: payload (the key) and wall time."""
                started = time.time()
                with open(stamp_file, "a") as out:
                    out.write(f"{(job.payload or b'').decode()} {started:.6f}\n")

        if os.environ.get("PGQ_KEYED"):

            @pgq.entrypoint("keyed", concurrency_limit=KEYED_LIMIT)
            async def keyed(job: Job) -> None:
                """Sleep KEYED_SLEEP_S, at most KEYED_LIMIT at once (pgqueuer's limit, in SQL)."""
                await asyncio.sleep(KEYED_SLEEP_S)

        yield pgq
    finally:
        await connection.close()
