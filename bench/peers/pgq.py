"""pgqueuer's figures for the peer benchmark (bench/peers/run.py), through its own API and CLI.

Producer: ``Queries(AsyncpgDriver(conn)).enqueue`` on one autocommit asyncpg connection, as in
pgqueuer's README (one call per job = one transaction; lists = its batch enqueue). Consumer:
``pgq run pgq_app:main`` at its defaults (batch size 10, no concurrency cap), with ``--mode drain``
for drains (it exits once the queue is empty) and the default continuous mode for pickup.
Schema: ``pgq install``. Every time compared comes from the database clock or wall time, as for
jobqueue.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import asyncpg
from pgqueuer.db import AsyncpgDriver
from pgqueuer.queries import Queries

HERE = Path(__file__).resolve().parent
PGQ = str(Path(sys.executable).with_name("pgq"))
TABLES = "pgqueuer, pgqueuer_log, pgqueuer_statistics"


def _env() -> dict[str, str]:
    return {**os.environ, "PGDSN": os.environ["PEERS_DATABASE_URL"], "PYTHONPATH": str(HERE)}


def install() -> None:
    """Create pgqueuer's schema (``pgq install``) in PEERS_DATABASE_URL."""
    subprocess.run([PGQ, "install"], env=_env(), check=True, stdout=subprocess.DEVNULL)


async def _connect() -> asyncpg.Connection:
    return await asyncpg.connect(os.environ["PEERS_DATABASE_URL"])


async def _reset(conn: asyncpg.Connection) -> None:
    await conn.execute(f"TRUNCATE {TABLES} RESTART IDENTITY")


def _payload(i: int) -> bytes:
    return json.dumps({"i": i}).encode()


async def _enqueue(n: int) -> float:
    conn = await _connect()
    try:
        await _reset(conn)
        queries = Queries(AsyncpgDriver(conn))
        start = time.perf_counter()
        for i in range(n):
            await queries.enqueue("noop", _payload(i))
        return n / (time.perf_counter() - start)
    finally:
        await conn.close()


def enqueue(n: int) -> float:
    """Return jobs/s of ``Queries.enqueue`` with one job per call (autocommit: one transaction)."""
    return asyncio.run(_enqueue(n))


async def _enqueue_many(n: int, reset: bool = True) -> float:
    conn = await _connect()
    try:
        if reset:
            await _reset(conn)
        queries = Queries(AsyncpgDriver(conn))
        payloads = [_payload(i) for i in range(n)]
        start = time.perf_counter()
        ids = await queries.enqueue(["noop"] * n, payloads, [0] * n)
        elapsed = time.perf_counter() - start
        assert len(ids) == n
        return n / elapsed
    finally:
        await conn.close()


def enqueue_many(n: int) -> float:
    """Return jobs/s of one batch ``Queries.enqueue`` of n jobs (lists of entrypoints, payloads,
    priorities)."""
    return asyncio.run(_enqueue_many(n))


async def _fetchval(statement: str) -> object:
    conn = await _connect()
    try:
        return await conn.fetchval(statement)
    finally:
        await conn.close()


def _succeeded() -> int:
    done = asyncio.run(_fetchval("SELECT count(*) FROM pgqueuer_log WHERE status = 'successful'"))
    return int(done)


def _consumer(*flags: str) -> subprocess.Popen:
    return subprocess.Popen(
        [PGQ, "run", "pgq_app:main", *flags],
        env=_env(),
        cwd=HERE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def drain(n: int, processes: int) -> float:
    """Return jobs/s (wall time of the ``pgq run --mode drain`` commands, start included) on n
    ready no-op jobs."""
    asyncio.run(_enqueue_many(n))  # setup, not measured: one batch
    asyncio.run(_fetchval("ANALYZE pgqueuer"))
    start = time.perf_counter()
    procs = [_consumer("--mode", "drain") for _ in range(processes)]
    for proc in procs:
        proc.wait()
    wall = time.perf_counter() - start
    done = _succeeded()
    if done != n:
        raise SystemExit(f"pgqueuer drain: {done} of {n} succeeded")
    return n / wall


def percentile(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, max(0, round(p / 100 * (len(values) - 1))))]


async def _pickup(samples: int, gap_s: float) -> list[float]:
    conn = await _connect()
    try:
        await _reset(conn)
        proc = _consumer()
        try:
            queries = Queries(AsyncpgDriver(conn))
            # A warm-up job, not counted, as for jobqueue: the samples start once the consumer
            # has run it, however long the loaded machine takes to start the process.
            [warm_up] = await queries.enqueue("noop", b"{}")
            await _wait_for(conn, "successful", 1, 120)
            await asyncio.sleep(0.5)  # idle again
            for i in range(samples):
                await queries.enqueue("noop", _payload(i))
                await asyncio.sleep(gap_s)
            await _wait_for(conn, "picked", samples + 1, 60)
        finally:
            proc.terminate()
            proc.wait()
        # Both log rows carry now() of their statement's transaction: the enqueue (autocommit,
        # so its commit) and the dequeue, like jobqueue's created_at and started_at.
        rows = await conn.fetch(
            "SELECT extract(epoch FROM p.created - q.created) * 1000 AS ms"
            " FROM pgqueuer_log q JOIN pgqueuer_log p USING (job_id)"
            " WHERE q.status = 'queued' AND p.status = 'picked' AND job_id <> $1",
            warm_up,
        )
    finally:
        await conn.close()
    if len(rows) != samples:
        raise SystemExit(f"pgqueuer pickup: {len(rows)} of {samples} picked")
    return [float(r["ms"]) for r in rows]


async def _wait_for(conn: asyncpg.Connection, status: str, count: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done = await conn.fetchval("SELECT count(*) FROM pgqueuer_log WHERE status = $1", status)
        if done >= count:
            return
        await asyncio.sleep(0.05)
    raise SystemExit(f"pgqueuer pickup: {done} of {count} {status} within {timeout_s:.0f} s")


def pickup(samples: int, gap_s: float) -> tuple[float, float]:
    """Return (p50, p99) ms of pick - enqueue commit into an idle ``pgq run``, jobs ``gap_s``
    apart."""
    delays = asyncio.run(_pickup(samples, gap_s))
    return percentile(delays, 50), percentile(delays, 99)
