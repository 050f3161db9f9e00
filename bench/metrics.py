"""Scrape cost of ``jobqueue.metrics`` at FIELD-CASES 30's size, and the plan of each statement.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/jq_metrics_bench \
        .venv/bin/python bench/metrics.py --finished 1000000

Recreates the database named by DATABASE_URL, fills it with one INSERT ... SELECT
generate_series (``--finished`` succeeded rows, a tenth as many dead, 10,000 ready rows in a
queue no worker serves, 50,000 scheduled a day ahead, 200 leased), VACUUM ANALYZEs it (as
autovacuum would after such a load; ``--no-vacuum`` skips it), then scrapes ``--scrapes`` times
and prints the time of a scrape (p50, p95; where the checkout has a shared reading, the time to
compute it and the time of a scrape that serves it), and for each statement of one computation
its plan's scans, whether it scans ``jobqueue_job`` sequentially, and its execution time
(EXPLAIN ANALYZE).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import bench_env, recreate_database

FILL = """
INSERT INTO jobqueue_job (queue, type, payload, priority, tenant_id, state, run_at, attempts,
    max_attempts, timeout_s, leased_by, errors, dead_reason, suspect, created_at, started_at,
    finished_at)
SELECT CASE WHEN g <= %(done)s THEN 'q' WHEN g <= %(done)s + 10000 THEN 'backlog' ELSE 'q' END,
    'bench.noop', '{}', 0, 't' || (g %% 50),
    CASE WHEN g <= %(succeeded)s THEN 'succeeded' WHEN g <= %(done)s THEN 'dead'
         WHEN g <= %(done)s + 10000 THEN 'ready' WHEN g <= %(done)s + 60000 THEN 'scheduled'
         ELSE 'leased' END,
    CASE WHEN g <= %(done)s + 10000 THEN now() - interval '1 hour'
         WHEN g <= %(done)s + 60000 THEN now() + interval '1 day' ELSE now() END,
    1, 8, 30, '', '[]', '', false, now() - interval '9 days', now() - interval '9 days',
    CASE WHEN g <= %(done)s THEN now() - (g %% 14400) * interval '1 minute' END
FROM generate_series(1, %(done)s + 60200) AS g
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--finished", type=int, default=1_000_000, help="succeeded rows")
    parser.add_argument("--scrapes", type=int, default=20)
    parser.add_argument("--no-vacuum", action="store_true")
    parser.add_argument("--keep", action="store_true", help="reuse the filled database")
    args = parser.parse_args()
    url = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/jq_metrics_bench")
    env = bench_env(url)
    if not args.keep:
        recreate_database(url, env)
    import django

    django.setup()
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from jobqueue import metrics

    if not args.keep:
        started = time.perf_counter()
        with connection.cursor() as cursor:
            cursor.execute(
                FILL,
                {"done": args.finished * 11 // 10, "succeeded": args.finished},
            )
        print(f"filled in {time.perf_counter() - started:.0f} s")
        connection.ensure_connection()
        connection.connection.autocommit = True
        with connection.cursor() as cursor:
            cursor.execute(
                "ANALYZE jobqueue_job" if args.no_vacuum else "VACUUM ANALYZE jobqueue_job"
            )
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*), pg_size_pretty(pg_total_relation_size('jobqueue_job'))"
            " FROM jobqueue_job"
        )
        rows, size = cursor.fetchone()
    print(f"jobqueue_job: {rows} rows, {size} with indexes")

    def timed(label: str, scrape) -> None:
        times = []
        for _ in range(args.scrapes):
            started = time.perf_counter()
            scrape()
            times.append((time.perf_counter() - started) * 1000)
        times.sort()
        p95 = times[min(len(times) - 1, int(len(times) * 0.95))]
        print(
            f"{label}: p50 {statistics.median(times):.1f} ms, p95 {p95:.1f} ms, "
            f"max {times[-1]:.1f} ms over {len(times)} scrapes"
        )

    try:
        # A scrape serves the shared reading; computing it (max_age_s=0) is once per interval.
        metrics.collect(max_age_s=0)
        timed("compute (the cluster's reading, once per interval)", lambda: metrics.compute())
        timed("scrape (serves the shared reading)", lambda: metrics.collect())
    except TypeError:  # a checkout from before the shared reading: every scrape computes
        timed("scrape (computes every time)", lambda: metrics.collect())
    with CaptureQueriesContext(connection) as captured:
        compute = getattr(metrics, "compute", metrics.collect)
        compute()
    seq = 0
    with connection.cursor() as cursor:
        for query in captured.captured_queries:
            sql = query["sql"]
            if "jobqueue_" not in sql or sql.startswith("EXPLAIN"):
                continue
            cursor.execute(f"EXPLAIN (ANALYZE, FORMAT TEXT) {sql}")
            plan = [row[0] for row in cursor.fetchall()]
            scans = [line.strip() for line in plan if "Scan" in line]
            took = next((line for line in plan if line.startswith("Execution Time")), "")
            bad = any("Seq Scan on jobqueue_job" in line for line in plan)
            seq += bad
            first = " ".join(sql.split())[:90]
            print(f"{'SEQ ' if bad else 'ok  '}{took:28} {first}")
            for line in scans:
                print(f"        {line[:110]}")
    print(f"statements with a sequential scan of jobqueue_job: {seq}")


if __name__ == "__main__":
    main()
