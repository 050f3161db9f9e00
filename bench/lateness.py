"""Lateness of delayed jobs and of cron fires on PostgreSQL, with real worker processes.

    .venv/bin/python bench/lateness.py [--jobs 500] [--cron-seconds 60] [--poll 1.0]

Recreates the database named by BENCH_DATABASE_URL (default
postgres://postgres@127.0.0.1:5432/jobqueue_bench_lateness), then measures, all by the database
clock:

* delayed jobs: --jobs no-op jobs enqueued with run_at spread over 25 s ahead, one idle
  ``runworkers`` (concurrency 10, --poll seconds between claims when idle): p50 / p99 / max of
  start - run_at (``started_at`` is set by the claim);
* cron: a per-second entry (``* * * * * *``) fired by two ``runworkers`` processes for
  --cron-seconds (one leads): p50 / p99 / max of job start - fire time, and of enqueue
  (``fired_at``) - fire time, negative when the job was enqueued ahead of its fire time.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time

from _common import ROOT, bench_env, recreate_database

URL = os.environ.get(
    "BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/jobqueue_bench_lateness"
)
ENV = bench_env(URL)


def setup_database() -> None:
    recreate_database(URL, ENV)


def workers(count: int, queue: str, settings: dict, *flags: str) -> list[subprocess.Popen]:
    env = {**ENV, "JOBQUEUE_SETTINGS": json.dumps(settings)}
    cmd = [sys.executable, "-m", "django", "runworkers", "--queues", queue, *flags]
    return [subprocess.Popen(cmd, env=env, cwd=ROOT) for _ in range(count)]


def stop(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        proc.terminate()
    for proc in procs:
        proc.wait()


def percentile(values: list[float], p: float) -> float:
    values = sorted(values)
    index = min(len(values) - 1, max(0, round(p / 100 * (len(values) - 1))))
    return values[index]


def stats(values: list[float]) -> str:
    return (
        f"{percentile(values, 50):>8.0f} {percentile(values, 99):>8.0f} {max(values):>8.0f}"
        f" {len(values):>6}"
    )


def query(sql: str) -> list[tuple]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(sql)
        return cursor.fetchall()


def bench_delayed(jobs: int, poll: float, spread_s: float = 25.0) -> list[float]:
    """Return start - run_at, ms, of ``jobs`` no-op jobs delayed by 2 s to 2 + ``spread_s``."""
    import jobqueue

    procs = workers(1, "delayed", {"POLL_INTERVAL_SECONDS": poll}, "--no-scheduler")
    try:
        time.sleep(3.0)  # started and idle
        rng = random.Random(4)
        for i in range(jobs):
            jobqueue.enqueue(
                "delayed", "tests.testapp.jobs.noop", {"i": i}, delay=rng.uniform(2, 2 + spread_s)
            )
        deadline = time.monotonic() + spread_s + 35
        while time.monotonic() < deadline:
            [(done,)] = query("SELECT count(*) FROM jobqueue_job WHERE state = 'succeeded'")
            if done == jobs:
                break
            time.sleep(0.5)
        else:
            raise SystemExit(f"delayed: only {done} of {jobs} jobs ran")
    finally:
        stop(procs)
    rows = query(
        "SELECT extract(epoch FROM started_at - run_at) FROM jobqueue_job WHERE queue = 'delayed'"
        " AND state = 'succeeded'"
    )
    return [float(r[0]) * 1000 for r in rows]


def bench_cron(seconds: float, poll: float) -> tuple[list[float], list[float]]:
    import jobqueue

    jobqueue.schedule("every-second", "* * * * * *", "cron", "tests.testapp.jobs.noop")
    procs = workers(2, "cron", {"POLL_INTERVAL_SECONDS": poll})
    try:
        time.sleep(3.0 + seconds)
    finally:
        stop(procs)
    rows = query(
        "SELECT extract(epoch FROM j.started_at - f.fire_time),"
        " extract(epoch FROM f.fired_at - f.fire_time)"
        " FROM jobqueue_cronfire f JOIN jobqueue_job j ON j.id = f.job_id"
        " WHERE j.started_at IS NOT NULL ORDER BY f.fire_time"
    )
    rows = rows[2:]  # the first fires happen while the processes start
    return [float(r[0]) * 1000 for r in rows], [float(r[1]) * 1000 for r in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--cron-seconds", type=float, default=60)
    parser.add_argument("--poll", type=float, default=1.0, help="POLL_INTERVAL_SECONDS")
    args = parser.parse_args()
    setup_database()
    import django

    django.setup()
    delayed = bench_delayed(args.jobs, args.poll)
    cron_start, cron_enqueue = bench_cron(args.cron_seconds, args.poll)

    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("SHOW server_version")
        pg = cur.fetchone()[0]
    print(
        f"\njobqueue lateness: POLL_INTERVAL_SECONDS={args.poll:g}, SCHEDULER_INTERVAL_SECONDS=1,"
        f" PostgreSQL {pg}, Django {django.get_version()}, Python {sys.version.split()[0]},"
        f" {os.cpu_count()} cores"
    )
    print(f"{'figure (ms)':<52} {'p50':>8} {'p99':>8} {'max':>8} {'n':>6}")
    print(f"{'delayed job: start - run_at':<52} {stats(delayed)}")
    print(f"{'cron fire: job start - fire time':<52} {stats(cron_start)}")
    print(f"{'cron fire: job enqueued - fire time':<52} {stats(cron_enqueue)}")


if __name__ == "__main__":
    main()
