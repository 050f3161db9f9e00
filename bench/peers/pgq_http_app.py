"""The pgqueuer consumer of ``bench/async_http.py``: one asyncpg connection and one async
entrypoint that GETs the job's URL with asyncio streams (the same client code as jobqueue's
``tests.testapp.async_jobs.fetch``), run by ``pgq run pgq_http_app:main --mode drain``."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
from pgqueuer import PgQueuer
from pgqueuer.db import AsyncpgDriver
from pgqueuer.models import Job


async def get(url: str) -> int:
    """GET ``url`` (``http://host:port/path``); return the status (tests/httpserver.py's get)."""
    hostport, _, path = url.split("://", 1)[1].partition("/")
    host, _, port = hostport.partition(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(f"GET /{path} HTTP/1.1\r\nHost: {hostport}\r\n\r\n".encode())
        await writer.drain()
        status = await reader.readline()
        await reader.read()
        return int(status.split()[1])
    finally:
        writer.close()


@asynccontextmanager
async def main() -> AsyncIterator[PgQueuer]:
    """Yield a PgQueuer with the ``fetch`` entrypoint, on PEERS_DATABASE_URL."""
    connection = await asyncpg.connect(os.environ["PEERS_DATABASE_URL"])
    try:
        pgq = PgQueuer(AsyncpgDriver(connection))

        @pgq.entrypoint("fetch")
        async def fetch(job: Job) -> None:
            """GET the URL in the payload; a status other than 200 fails the job."""
            assert job.payload is not None
            if await get(job.payload.decode()) != 200:
                raise RuntimeError("not 200")

        yield pgq
    finally:
        await connection.close()
