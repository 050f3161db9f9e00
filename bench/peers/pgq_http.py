"""pgqueuer's side of ``bench/async_http.py``, run with the peers' Python (pgqueuer, asyncpg).

    bench/.venv-peers/bin/python bench/peers/pgq_http.py JOBS URL BATCH_SIZE MAX_CONCURRENT

Creates pgqueuer's schema in PEERS_DATABASE_URL (``pgq install``; the database is recreated by
the caller), enqueues JOBS ``fetch`` jobs of URL in one batch, drains them with one ``pgq run
--mode drain`` process, and prints one JSON line: done, wall_s (process start to exit), run_s
(first pick to last success, pgqueuer_log's database clock), peak_rss_mb (VmHWM).
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


def _env() -> dict[str, str]:
    return {**os.environ, "PGDSN": os.environ["PEERS_DATABASE_URL"], "PYTHONPATH": str(HERE)}


async def _enqueue(n: int, url: str) -> None:
    conn = await asyncpg.connect(os.environ["PEERS_DATABASE_URL"])
    try:
        await Queries(AsyncpgDriver(conn)).enqueue(["fetch"] * n, [url.encode()] * n, [0] * n)
    finally:
        await conn.close()


async def _span() -> tuple[int, float]:
    conn = await asyncpg.connect(os.environ["PEERS_DATABASE_URL"])
    try:
        done = await conn.fetchval("SELECT count(*) FROM pgqueuer_log WHERE status = 'successful'")
        span = await conn.fetchval(
            "SELECT extract(epoch FROM max(created) FILTER (WHERE status = 'successful')"
            " - min(created) FILTER (WHERE status = 'picked')) FROM pgqueuer_log"
        )
        return int(done), float(span or 0.0)
    finally:
        await conn.close()


def peak_rss_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None


def main() -> None:
    jobs, url, batch, concurrent = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    subprocess.run([PGQ, "install"], env=_env(), check=True, stdout=subprocess.DEVNULL)
    asyncio.run(_enqueue(jobs, url))
    cmd = [PGQ, "run", "pgq_http_app:main", "--mode", "drain"]
    cmd += ["--batch-size", batch, "--max-concurrent-tasks", concurrent]
    began = time.monotonic()
    proc = subprocess.Popen(cmd, env=_env(), cwd=HERE, stdout=subprocess.DEVNULL)
    peak = 0.0
    while proc.poll() is None:
        rss = peak_rss_mb(proc.pid)
        if rss is not None:
            peak = max(peak, rss)
        time.sleep(0.02)
    wall = time.monotonic() - began
    done, run = asyncio.run(_span())
    print(json.dumps({"done": done, "wall_s": wall, "run_s": run, "peak_rss_mb": peak}))


if __name__ == "__main__":
    main()
