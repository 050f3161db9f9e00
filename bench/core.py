"""Core throughput and latency of jobqueue on PostgreSQL, beside the raw-SQL limit, in one run.

    .venv/bin/python bench/core.py [--jobs 10000] [--runs 3]

Recreates the database named by BENCH_DATABASE_URL (default
postgres://postgres@127.0.0.1:5432/jobqueue_bench), then prints, each the median of --runs:

* enqueue: jobs/s for ``jobqueue.enqueue`` with one job per transaction (autocommit);
* drain: jobs/s for ``runworkers --burst`` on --jobs ready no-op jobs with 1 and 2 processes,
  both as wall time of the whole command (process start included) and as the span from the
  first claim to the last ack (database clock);
* pickup: p50/p99 of start - enqueue (database clock) for jobs enqueued one at a time into an
  idle worker;
* the limit: the same work in plain psycopg (one INSERT per transaction; claim 100 with
  FOR UPDATE SKIP LOCKED + one UPDATE acking 100), and each jobqueue figure as a fraction of it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

from _common import ROOT, bench_env, recreate_database

URL = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/jobqueue_bench")
ENV = bench_env(URL)


def setup_database() -> None:
    recreate_database(URL, ENV)


def django_setup():
    import django

    django.setup()


def truncate() -> None:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("TRUNCATE jobqueue_job, jobqueue_worker RESTART IDENTITY")


def bulk_ready(n: int) -> None:
    """Insert n ready no-op jobs in one statement (setup for the drain; not measured)."""
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute(
            "INSERT INTO jobqueue_job (queue, type, payload, priority, tenant_id, state, run_at,"
            " attempts, max_attempts, timeout_s, leased_by, errors, dead_reason, created_at)"
            " SELECT 'bench', 'tests.testapp.jobs.noop', '{}', 0, '', 'ready', now(), 0, 8, 30,"
            " '', '[]', '', now() FROM generate_series(1, %s)",
            [n],
        )
        cur.execute("ANALYZE jobqueue_job")


def bench_enqueue(n: int) -> float:
    import jobqueue

    truncate()
    start = time.perf_counter()
    for i in range(n):
        jobqueue.enqueue("bench", "tests.testapp.jobs.noop", {"i": i})
    return n / (time.perf_counter() - start)


def bench_drain(n: int, processes: int, concurrency: int = 10) -> tuple[float, float]:
    from django.db import connection

    truncate()
    bulk_ready(n)
    cmd = [
        sys.executable,
        "-m",
        "django",
        "runworkers",
        "--queues",
        "bench",
        "--burst",
        "--concurrency",
        str(concurrency),
    ]
    start = time.perf_counter()
    procs = [subprocess.Popen(cmd, env=ENV, cwd=ROOT) for _ in range(processes)]
    for proc in procs:
        proc.wait()
    wall = time.perf_counter() - start
    with connection.cursor() as cur:
        cur.execute(
            "SELECT count(*) FILTER (WHERE state = 'succeeded'),"
            " extract(epoch FROM max(finished_at) - min(started_at)) FROM jobqueue_job"
        )
        done, span = cur.fetchone()
    if done != n:
        raise SystemExit(f"drain: only {done} of {n} jobs succeeded")
    return n / wall, n / float(span)


def bench_pickup(samples: int, gap_s: float) -> tuple[float, float]:
    from django.db import connection

    import jobqueue

    truncate()
    cmd = [sys.executable, "-m", "django", "runworkers", "--queues", "bench", "--concurrency", "4"]
    proc = subprocess.Popen(cmd, env=ENV, cwd=ROOT)
    try:
        time.sleep(2.0)  # let it start and go idle
        for i in range(samples):
            jobqueue.enqueue("bench", "tests.testapp.jobs.noop", {"i": i})
            time.sleep(gap_s)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with connection.cursor() as cur:
                cur.execute("SELECT count(*) FROM jobqueue_job WHERE state = 'succeeded'")
                if cur.fetchone()[0] == samples:
                    break
            time.sleep(0.1)
    finally:
        proc.terminate()
        proc.wait()
    with connection.cursor() as cur:
        cur.execute("SELECT extract(epoch FROM started_at - created_at) FROM jobqueue_job")
        delays = sorted(float(r[0]) * 1000 for r in cur.fetchall())
    return percentile(delays, 50), percentile(delays, 99)


def percentile(values: list[float], p: float) -> float:
    index = min(len(values) - 1, max(0, round(p / 100 * (len(values) - 1))))
    return values[index]


def raw_limit(n: int) -> tuple[float, float]:
    """Return (insert jobs/s, claim+ack jobs/s) for plain psycopg on the same table."""
    import psycopg

    truncate()
    with psycopg.connect(URL, autocommit=True) as conn:
        start = time.perf_counter()
        for i in range(n):
            conn.execute(
                "INSERT INTO jobqueue_job (queue, type, payload, priority, tenant_id, state,"
                " run_at, attempts, max_attempts, timeout_s, leased_by, errors, dead_reason,"
                " created_at) VALUES ('bench', 'noop', %s, 0, '', 'ready', now(), 0, 8, 30, '',"
                " '[]', '', now())",
                [f'{{"i": {i}}}'],
            )
        insert_rate = n / (time.perf_counter() - start)
        conn.execute("ANALYZE jobqueue_job")
        start = time.perf_counter()
        done = 0
        while True:
            rows = conn.execute(
                "WITH picked AS (SELECT id FROM jobqueue_job WHERE queue = 'bench'"
                " AND state IN ('ready','scheduled') AND run_at <= now()"
                " ORDER BY priority DESC, run_at, id LIMIT 100 FOR UPDATE SKIP LOCKED)"
                " UPDATE jobqueue_job j SET state = 'leased', attempts = j.attempts + 1,"
                " lease_token = gen_random_uuid(), lease_until = now() + interval '30 s'"
                " FROM picked WHERE j.id = picked.id RETURNING j.id, j.lease_token"
            ).fetchall()
            if not rows:
                break
            conn.execute(
                "UPDATE jobqueue_job SET state = 'succeeded', finished_at = now()"
                " WHERE id = ANY(%s) AND state = 'leased'",
                [[r[0] for r in rows]],
            )
            done += len(rows)
        drain_rate = done / (time.perf_counter() - start)
    return insert_rate, drain_rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--pickup-samples", type=int, default=100)
    args = parser.parse_args()
    setup_database()
    django_setup()

    def median(fn, *a):
        results = [fn(*a) for _ in range(args.runs)]
        if isinstance(results[0], tuple):
            return tuple(statistics.median(r[i] for r in results) for i in range(len(results[0])))
        return statistics.median(results)

    enqueue = median(bench_enqueue, min(args.jobs, 5000))
    drain1 = median(bench_drain, args.jobs, 1)
    drain2 = median(bench_drain, args.jobs, 2)
    raw_insert, raw_drain = median(raw_limit, args.jobs)
    p50, p99 = bench_pickup(args.pickup_samples, 0.05)

    import django
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("SHOW server_version")
        pg = cur.fetchone()[0]
    print(
        f"\njobqueue core benchmark: {args.jobs} no-op jobs, median of {args.runs} runs, "
        f"PostgreSQL {pg}, Django {django.get_version()}, Python {sys.version.split()[0]}, "
        f"{os.cpu_count()} cores"
    )
    print(f"{'figure':<46} {'jobqueue':>12} {'raw SQL':>12} {'fraction':>9}")
    rows = [
        ("enqueue, 1 job/transaction (jobs/s)", enqueue, raw_insert),
        ("drain --burst, 1 process x 10 (jobs/s, wall)", drain1[0], raw_drain),
        ("drain --burst, 1 process x 10 (jobs/s, span)", drain1[1], raw_drain),
        ("drain --burst, 2 processes x 10 (jobs/s, wall)", drain2[0], raw_drain),
        ("drain --burst, 2 processes x 10 (jobs/s, span)", drain2[1], raw_drain),
    ]
    for label, ours, limit in rows:
        print(f"{label:<46} {ours:>12,.0f} {limit:>12,.0f} {ours / limit:>9.2f}")
    print(f"{'pickup on an idle worker, p50 / p99 (ms)':<46} {p50:>6.0f} / {p99:<6.0f}")


if __name__ == "__main__":
    main()
