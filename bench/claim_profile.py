"""The claim's server-side cost by the number of lanes (tenants with work): one claim of 10.

    .venv/bin/python bench/claim_profile.py [--tenants 1,100,1000,10000] [--jobs 20000]
    BENCH_JOBQUEUE_ROOT=/path/to/before .venv/bin/python bench/claim_profile.py   # the "before"

Recreates BENCH_DATABASE_URL (default .../jobqueue_claim_profile), and for each tenant count
inserts --jobs ready no-op jobs dealt round robin over that many tenants of one queue, ANALYZEs,
then runs the claim statement as the store sends it (the transaction limits in front, so JIT
off) under ``EXPLAIN (ANALYZE, BUFFERS)`` 7 times, each claim committed (its jobs leased, as a
worker's). Prints the median of the statement's shared buffers touched (hit + read), its
planning time and its execution time. Buffers do not depend on the machine's load; the times
do. Also prints the same claim through its server-side function when the checkout has one
(client wall time, median of 50 claims, planning included where the statement is sent).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import time

from _common import bench_env, recreate_database

URL = os.environ.get(
    "BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/jobqueue_claim_profile"
)
ENV = bench_env(URL)
NOOP = "tests.testapp.jobs.noop"


def fill(tenants: int, jobs: int) -> None:
    """``jobs`` ready no-op jobs in queue ``q``, dealt round robin over ``tenants`` tenants."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE jobqueue_job CASCADE")
        if "jobqueue_lane" in connection.introspection.table_names():
            cursor.execute("TRUNCATE jobqueue_lane")
        cursor.execute(
            "INSERT INTO jobqueue_job (queue, type, payload, priority, tenant_id, state, run_at,"
            " attempts, max_attempts, timeout_s, leased_by, errors, dead_reason, created_at)"
            " SELECT 'q', %s, '{}', 0, 't' || (i %% %s), 'ready', now() - interval '1 hour',"
            " 0, 8, 30, '', '[]', '', now() FROM generate_series(1, %s) AS i",
            [NOOP, tenants, jobs],
        )
        cursor.execute("ANALYZE jobqueue_job")


def explain_once() -> tuple[int, float, float]:
    """Return (buffers, planning ms, execution ms) of one claim of 10, committed."""
    from jobqueue.store import bounded
    from jobqueue.store.sqltext import sql
    from tests.factories import claim_params

    with bounded.execute(
        "default", "EXPLAIN (ANALYZE, BUFFERS) " + sql("claim~rates"), claim_params(["q"])
    ) as cursor:
        plan = "\n".join(r[0] for r in cursor.fetchall())
    top = next(line for line in plan.splitlines() if "Buffers:" in line)
    buffers = sum(int(n) for n in re.findall(r"(?:hit|read)=(\d+)", top))
    planning = float(re.search(r"Planning Time: ([\d.]+)", plan).group(1))
    execution = float(re.search(r"Execution Time: ([\d.]+)", plan).group(1))
    return buffers, planning, execution


def claim_wall(tenants: int, jobs: int, claims: int = 50) -> float:
    """Median client wall time (ms) of ``claims`` claims of 10 through the store."""
    from jobqueue.limits.fairness import QueueSelector
    from jobqueue.store import get_store

    fill(tenants, jobs)
    store, selector, times = get_store(), QueueSelector(["q"]), []
    for _ in range(claims):
        start = time.perf_counter()
        got = store.claim(["q"], "bench", 10, 30.0, plan=selector.plan())
        times.append((time.perf_counter() - start) * 1000)
        selector.claimed(got)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tenants", default="1,100,1000,10000")
    parser.add_argument("--jobs", type=int, default=20000)
    args = parser.parse_args()
    recreate_database(URL, ENV)
    import django

    django.setup()
    print(f"{'tenants':>8} {'buffers':>8} {'plan ms':>8} {'exec ms':>8} {'claim ms':>9}")
    for tenants in [int(t) for t in args.tenants.split(",")]:
        fill(tenants, max(args.jobs, 2 * tenants))
        runs = sorted((explain_once() for _ in range(7)), key=lambda r: r[2])
        buffers, planning, execution = runs[len(runs) // 2]
        wall = claim_wall(tenants, max(args.jobs, 2 * tenants))
        print(f"{tenants:>8} {buffers:>8} {planning:>8.2f} {execution:>8.2f} {wall:>9.2f}")


if __name__ == "__main__":
    main()
