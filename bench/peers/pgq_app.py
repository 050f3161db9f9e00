"""The pgqueuer consumer the peer benchmark starts with ``pgq run pgq_app:main``: one asyncpg
connection, ``PgQueuer(AsyncpgDriver(...))`` and one no-op entrypoint, as in pgqueuer's quick
start. pgqueuer 1.6's ``pgq run`` wants the factory as an async context manager (it says so when
given the README's plain coroutine), so the connection is closed on the way out."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
from pgqueuer import PgQueuer
from pgqueuer.db import AsyncpgDriver
from pgqueuer.models import Job


@asynccontextmanager
async def main() -> AsyncIterator[PgQueuer]:
    """Yield a PgQueuer with the no-op entrypoint, on PEERS_DATABASE_URL."""
    connection = await asyncpg.connect(os.environ["PEERS_DATABASE_URL"])
    try:
        pgq = PgQueuer(AsyncpgDriver(connection))

        @pgq.entrypoint("noop")
        async def noop(job: Job) -> None:
            """Do nothing (pgqueuer)."""

        yield pgq
    finally:
        await connection.close()
