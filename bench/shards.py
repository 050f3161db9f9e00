"""One queue sharded over two PostgreSQL primaries, against the same queue on one (issue 16).

Two private clusters (tests/pgcluster.py), each with pg_stat_statements. The same --jobs no-op
jobs of 100 tenants are drained twice by --processes worker processes of --slots slots:

1. ``QUEUE_DATABASES = {"scale": "default"}``: every job on primary A.
2. ``QUEUE_DATABASES = {"scale": ["default", "queues2"]}``: the queue sharded over A and B by
   the tenant's hash; ``runworkers`` runs one process per alias, so half as many invocations
   give the same number of worker processes.

Printed per run: drain jobs/s (first start to last finish, database clocks of one machine), and
per primary its share of the jobs, statements and database time (execution + planning) per job
it ran. The figure that must show: each primary's statements per job stay what one primary's
are (nothing on the hot path crosses primaries), and the split is even (goal: within 10 %).

    .venv/bin/python bench/shards.py                    # 10,000 jobs, 4 processes x 10 (~3 min)

On a 2-core machine both primaries and every worker share the same cores: two primaries cannot
drain faster than one here, and the bench says so rather than hiding it.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg

from bench._clusters import django_env, migrate, start_cluster, statement_totals
from bench._common import ROOT

NOOP = "tests.testapp.jobs.noop"
QUEUE = "scale"
DBNAME = "shards"
ROUTER = "jobqueue.routers.QueueDatabaseRouter"

ENQUEUE = f"""
import sys, django
django.setup()
import jobqueue
n = int(sys.argv[1])
for first in range(0, n, 1000):
    jobqueue.enqueue_many(
        [{{"queue": "{QUEUE}", "job_type": "{NOOP}", "payload": {{}}, "tenant_id": f"t{{i % 100}}"}}
         for i in range(first, min(n, first + 1000))]
    )
"""


def env_for(a_url: str, b_url: str, queue_databases: object) -> dict[str, str]:
    """A process's environment: A as ``default``, B as ``queues2``, the router on."""
    return django_env(
        a_url,
        {"QUEUE_DATABASES": queue_databases},
        JOBQUEUE_QUEUES2_URL=b_url,
        JOBQUEUE_TEST_ROUTERS=ROUTER,
    )


#: This bench's own read of the jobs (its text in pg_stat_statements, left out of the counts).
SUCCEEDED_QUERY = "%count(*) FILTER%"


def reading(url: str) -> tuple[int, float, int]:
    """(statements so far, their database time in ms, succeeded jobs) on one primary."""
    calls, ms = statement_totals(url, DBNAME, skip=(SUCCEEDED_QUERY,))
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FILTER (WHERE state = 'succeeded') FROM jobqueue_job"
        ).fetchone()
    assert row is not None
    return calls, ms, int(row[0])


def span(urls: list[str]) -> float:
    """Seconds from the first start to the last finish over every primary."""
    starts, ends = [], []
    for url in urls:
        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute(
                "SELECT extract(epoch FROM min(started_at)), extract(epoch FROM max(finished_at))"
                " FROM jobqueue_job WHERE state = 'succeeded'"
            ).fetchone()
        if row and row[0] is not None:
            starts.append(float(row[0]))
            ends.append(float(row[1]))
    return max(ends) - min(starts) if starts else 0.0


def run(
    label: str, urls: list[str], queue_databases: object, invocations: int, args: argparse.Namespace
) -> None:
    """Enqueue, drain with ``invocations`` runworkers commands, print the figures."""
    for url in urls:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("TRUNCATE jobqueue_job CASCADE")
    env = env_for(urls[0], urls[1], queue_databases)
    done = subprocess.run(
        [sys.executable, "-c", ENQUEUE, str(args.jobs)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"{label}: enqueue failed:\n{done.stderr[-2000:]}")
    before = [reading(url) for url in urls]
    cmd = [
        sys.executable,
        "-m",
        "django",
        "runworkers",
        "--queues",
        QUEUE,
        "--concurrency",
        str(args.slots),
        "--no-scheduler",
    ]
    procs = [
        subprocess.Popen(
            cmd,
            env=env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        for _ in range(invocations)
    ]
    deadline = time.monotonic() + 1800
    try:
        while time.monotonic() < deadline:
            time.sleep(0.5)
            if sum(reading(url)[2] for url in urls) >= args.jobs:
                break
    finally:
        for p in procs:
            os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            p.wait(timeout=120)
    after = [reading(url) for url in urls]
    total = sum(a[2] for a in after)
    seconds = span(urls)
    print(
        f"\n== {label}: {total:,} of {args.jobs:,} succeeded, "
        f"{total / seconds if seconds else 0:,.0f} jobs/s (first start to last finish)"
    )
    for name, b, a in zip(("A", "B"), before, after, strict=True):
        ran = a[2] - b[2]
        if ran == 0 and a[0] - b[0] == 0:
            continue
        per = max(ran, 1)
        print(
            f"  primary {name}: {ran:,} jobs ({ran / max(total, 1):.1%}),"
            f" {(a[0] - b[0]) / per:.2f} statements and {(a[1] - b[1]) / per:.3f} ms of"
            f" database time per job"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--processes", type=int, default=4, help="worker processes in all (even)")
    parser.add_argument("--slots", type=int, default=10)
    args = parser.parse_args()
    a = start_cluster(DBNAME)
    b = start_cluster(DBNAME)
    try:
        urls = [a.url(DBNAME), b.url(DBNAME)]
        sharded = {QUEUE: ["default", "queues2"]}
        for database in ("default", "queues2"):
            migrate(env_for(urls[0], urls[1], sharded), database)
        print(
            f"shards: {args.jobs:,} no-op jobs of 100 tenants, {args.processes} worker processes"
            f" x {args.slots} slots; load average {os.getloadavg()[0]:.1f}"
        )
        run("one primary", urls, {QUEUE: "default"}, args.processes, args)
        run("sharded over two primaries", urls, sharded, max(args.processes // 2, 1), args)
        print(f"\nload average at the end {os.getloadavg()[0]:.1f}")
    finally:
        a.destroy()
        b.destroy()


if __name__ == "__main__":
    main()
