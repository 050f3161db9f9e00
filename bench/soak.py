"""Soak: push many no-op jobs through `runworkers --processes 2` and check nothing leaks or sticks.

    .venv/bin/python bench/soak.py [--jobs 200000] [--processes 2] [--concurrency 10]
    .venv/bin/python bench/soak.py --feed --jobs 500000 [--processes 1] [--concurrency N]

Prints jobs/s, each worker process's resident memory (RSS) shortly after start and at the end,
and the count of lost (missing or not succeeded) and stuck (still leased) jobs, both of which
must be 0. Uses its own database (SOAK_DATABASE_URL, default .../jobqueue_soak), recreated.

``--feed`` (issue 15, "memory flat") is the long-running form: the jobs are not loaded up front
but fed by an enqueuer (this script, a few thousand at a time, keeping a small backlog) while the
workers drain them, and each worker's RSS (VmRSS of /proc/PID/status) is printed at 10,000,
50,000, then every 50,000 jobs done; the last line is the growth from 10,000 jobs to the end.
Without ``--concurrency`` the workers run on JOBQUEUE's defaults.
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
    parser.add_argument("--concurrency", type=int, default=None)
    parser.add_argument("--feed", action="store_true", help="feed jobs while draining; RSS curve")
    args = parser.parse_args()
    env = bench_env(URL)
    recreate_database(URL, env)
    if args.feed:
        feed(args, env)
        return
    args.concurrency = args.concurrency or 10
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


FEED_BATCH = 5_000
"""Jobs the enqueuer adds at a time, whenever fewer than this many are live."""


def start_workers(args: argparse.Namespace, env: dict[str, str]) -> subprocess.Popen:
    """Start ``runworkers`` on the soak queue (its defaults unless --concurrency)."""
    command = [sys.executable, "-m", "django", "runworkers", "--queues", "soak"]
    command += ["--processes", str(args.processes)]
    if args.concurrency:
        command += ["--concurrency", str(args.concurrency)]
    return subprocess.Popen(command, env=env, cwd=ROOT)


def feed(args: argparse.Namespace, env: dict[str, str]) -> None:
    """Feed ``args.jobs`` no-op jobs while the workers drain them; print RSS at each mark."""
    marks = [10_000, *range(50_000, args.jobs + 1, 50_000)]
    with psycopg.connect(URL, autocommit=True) as conn:
        sup = start_workers(args, env)
        pids: list[int] = []
        while len(pids) < args.processes:
            time.sleep(0.2)
            pids = [r[0] for r in conn.execute("SELECT pid FROM jobqueue_worker")]
        start = time.perf_counter()
        fed = done = 0
        curve: dict[int, dict[int, int | None]] = {}
        print(f"{'jobs done':>10} {'s':>7} {'jobs/s':>7}  RSS KiB per worker process")
        while marks and time.perf_counter() - start < 3 * 3600:
            live = conn.execute(
                "SELECT count(*) FROM jobqueue_job WHERE state IN ('ready', 'scheduled', 'leased')"
            ).fetchone()[0]
            done = fed - live
            if live < FEED_BATCH and fed < args.jobs:
                n = min(FEED_BATCH, args.jobs - fed)
                conn.execute(
                    "INSERT INTO jobqueue_job (queue, type, payload, priority, tenant_id, state,"
                    " run_at, attempts, max_attempts, timeout_s, leased_by, errors, dead_reason,"
                    " created_at) SELECT 'soak', 'tests.testapp.jobs.noop',"
                    " jsonb_build_object('i', g), 0, '', 'ready', now(), 0, 8, 30, '', '[]', '',"
                    " now() FROM generate_series(1, %s) g",
                    [n],
                )
                fed += n
            if done >= marks[0]:
                elapsed = time.perf_counter() - start
                curve[marks[0]] = {pid: rss_kib(pid) for pid in pids}
                rss = "  ".join(f"{pid}: {kib}" for pid, kib in curve[marks[0]].items())
                print(f"{done:>10,} {elapsed:>7.0f} {done / elapsed:>7.0f}  {rss}", flush=True)
                marks.pop(0)
            time.sleep(0.5)
        sup.send_signal(signal.SIGTERM)
        sup.wait(timeout=300)
    first, last = curve[min(curve)], curve[max(curve)]
    for pid in pids:
        if first[pid] and last[pid]:
            growth = 100 * (last[pid] - first[pid]) / first[pid]
            print(f"worker {pid}: RSS {first[pid]} -> {last[pid]} KiB ({growth:+.1f}%)")


if __name__ == "__main__":
    main()
