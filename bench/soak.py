"""Soak: push many no-op jobs through `runworkers --processes 2` and check nothing leaks or sticks.

    .venv/bin/python bench/soak.py [--jobs 200000] [--processes 2] [--concurrency 10]

Prints jobs/s, each worker process's resident memory (RSS) shortly after start and at the end,
and the count of lost (missing or not succeeded) and stuck (still leased) jobs, both of which
must be 0. Uses its own database (SOAK_DATABASE_URL, default .../jobqueue_soak), recreated.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
from _common import ROOT, bench_env, recreate_database

URL = os.environ.get("SOAK_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/jobqueue_soak")


def rss_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=200_000)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=10)
    args = parser.parse_args()
    env = bench_env(URL)
    recreate_database(URL, env)
    with psycopg.connect(URL, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO jobqueue_job (queue, type, payload, priority, tenant_id, state, run_at,"
            " attempts, max_attempts, timeout_s, leased_by, errors, dead_reason, created_at)"
            " SELECT 'soak', 'tests.testapp.jobs.noop', jsonb_build_object('i', g), 0, '',"
            " 'ready', now(), 0, 8, 30, '', '[]', '', now() FROM generate_series(1, %s) g",
            [args.jobs],
        )
        conn.execute("ANALYZE jobqueue_job")
        sup = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "django",
                "runworkers",
                "--queues",
                "soak",
                "--processes",
                str(args.processes),
                "--concurrency",
                str(args.concurrency),
            ],
            env=env,
            cwd=ROOT,
        )
        start = time.perf_counter()
        pids: list[int] = []
        while len(pids) < args.processes:
            time.sleep(0.2)
            pids = [r[0] for r in conn.execute("SELECT pid FROM jobqueue_worker")]
        time.sleep(2)
        rss_start = {pid: rss_kib(pid) for pid in pids}
        done = 0
        while done < args.jobs:
            time.sleep(1)
            done = conn.execute(
                "SELECT count(*) FROM jobqueue_job WHERE state = 'succeeded'"
            ).fetchone()[0]
            if time.perf_counter() - start > 3600:
                break
        elapsed = time.perf_counter() - start
        rss_end = {pid: rss_kib(pid) for pid in pids}
        sup.send_signal(signal.SIGTERM)
        sup.wait(timeout=60)
        stuck = conn.execute("SELECT count(*) FROM jobqueue_job WHERE state = 'leased'").fetchone()[
            0
        ]
        succeeded = conn.execute(
            "SELECT count(*) FROM jobqueue_job WHERE state = 'succeeded'"
        ).fetchone()[0]
        twice = conn.execute("SELECT count(*) FROM jobqueue_job WHERE attempts > 1").fetchone()[0]
    lost = args.jobs - succeeded
    print(f"\nsoak: {args.jobs} no-op jobs, {args.processes} processes x {args.concurrency}")
    print(f"jobs/s                  {args.jobs / elapsed:,.0f} ({elapsed:.1f} s)")
    for pid in pids:
        print(f"worker {pid} RSS        start {rss_start[pid]} KiB, end {rss_end[pid]} KiB")
    print(f"lost                    {lost}")
    print(f"stuck (leased)          {stuck}")
    print(f"ran more than once      {twice}")


if __name__ == "__main__":
    main()
