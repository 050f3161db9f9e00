"""What server-side prepared statements save on the worker's hot statements, and the claim's plan.

Same database, same process, interleaved rounds with preparation on (the store's default on a
direct alias) and off (the one-query-string path a pooled alias takes). Each round enqueues N
no-op jobs, VACUUM ANALYZEs, then drains them here by ``claim`` of ``--batch``, one heartbeat of
what was claimed and ``finish_many`` of it (the store's statements only: no handler, no worker),
and reports per statement wall ms per call and client CPU µs per job. Then the claim's plan: the
generic plan a prepared claim would get after five executions against the custom plan it gets
every time, by ``EXPLAIN ANALYZE`` at 5,000 and 100,000 ready rows.

    .venv/bin/python bench/prepared.py     # 5,000 jobs, batch 10, 4 rounds per side
    .venv/bin/python bench/prepared.py --batch 50 --rounds 6
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import time

from _common import bench_env, recreate_database

URL = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/jobqueue_bench")
ENV = bench_env(URL)
STATEMENTS = ("claim", "heartbeat", "finish_many")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=5_000)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=4, help="rounds per side")
    parser.add_argument("--plans", default="5000,100000", help="ready rows for the plan check")
    args = parser.parse_args()
    recreate_database(URL, ENV)

    import django

    django.setup()
    import psycopg
    from django.db import connection

    from jobqueue.store import NewJob, bounded, get_store
    from jobqueue.store.finishing import ack_outcome
    from jobqueue.store.sqltext import sql

    store = get_store()
    may_prepare = bounded._may_prepare

    def one_round(prepared: bool) -> dict[str, tuple[list[float], float]]:
        bounded._may_prepare = may_prepare if prepared else (lambda alias, conn: False)
        with connection.cursor() as cursor:
            cursor.execute("TRUNCATE jobqueue_job")
        new = NewJob(queue="bench", type="tests.testapp.jobs.noop", payload_json="{}")
        store.enqueue_many([new] * args.jobs)
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE jobqueue_job")
        walls: dict[str, list[float]] = {name: [] for name in STATEMENTS}
        cpu = dict.fromkeys(STATEMENTS, 0.0)

        def timed(name, call, *args):
            c0, t0 = time.process_time(), time.perf_counter()
            out = call(*args)
            walls[name].append((time.perf_counter() - t0) * 1e3)
            cpu[name] += time.process_time() - c0
            return out

        while True:
            jobs = timed("claim", store.claim, ["bench"], "bench", args.batch, 60.0)
            if not jobs:
                break
            leases = [(j.id, j.lease_token) for j in jobs]
            timed("heartbeat", store.extend_leases, leases, 60.0)
            acks = [ack_outcome(j.id, j.lease_token, "null") for j in jobs]
            timed("finish_many", store.finish_many, acks)
        bounded._may_prepare = may_prepare
        connection.close()  # the next round starts with no prepared statement
        return {name: (walls[name], cpu[name] / args.jobs * 1e6) for name in STATEMENTS}

    results: dict[bool, list[dict]] = {True: [], False: []}
    for r in range(args.rounds):
        for prepared in (True, False) if r % 2 == 0 else (False, True):
            results[prepared].append(one_round(prepared))
    print(
        f"{args.jobs:,} jobs, batches of {args.batch}, {args.rounds} rounds per side, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    print("| statement | side | wall ms per call p50 / p90 | client CPU µs per job |")
    print("| --- | --- | ---: | ---: |")
    for name in STATEMENTS:
        for prepared in (False, True):
            walls = sorted(w for one in results[prepared] for w in one[name][0])
            cpus = [one[name][1] for one in results[prepared]]
            print(
                f"| {name} | {'prepared' if prepared else 'one query string'} | "
                f"{statistics.median(walls):.2f} / {walls[int(len(walls) * 0.9)]:.2f} | "
                f"{statistics.median(cpus):.1f} |"
            )
    plans(psycopg, sql, args.plans)


def plans(psycopg, sql, sizes: str) -> None:
    """EXPLAIN ANALYZE the claim of 10 as a generic and as a custom plan at each size."""
    text = sql("claim")
    params = {
        "queues": ["bench"],
        "weights": [1.0],
        "start": [0.0],
        "strict": False,
        "default_cap": None,
        "cap_tenants": [],
        "cap_values": [],
        "worker_id": "w",
        "max_jobs": 10,
        "lease_s": 60.0,
        "now": None,
    }
    order = list(dict.fromkeys(re.findall(r"%\((\w+)\)s", text)))
    numbered = text
    for n, name in enumerate(order, 1):
        numbered = numbered.replace(f"%({name})s", f"${n}")
    conn = psycopg.connect(URL.replace("postgres://", "postgresql://"), autocommit=True)
    args = ", ".join(psycopg.sql.Literal(params[k]).as_string(conn) for k in order)
    print("\n| ready rows | plan | planning ms | execution ms | JIT |")
    print("| ---: | --- | ---: | ---: | --- |")
    for size in [int(s) for s in sizes.split(",")]:
        conn.execute("TRUNCATE jobqueue_job")
        conn.execute(
            "INSERT INTO jobqueue_job (queue, type, payload, priority, tenant_id, state, run_at,"
            " attempts, max_attempts, timeout_s, leased_by, errors, dead_reason, created_at)"
            " SELECT 'bench', 'x', '{}', 0, '', 'ready', now(), 0, 8, 30, '', '[]', '', now()"
            " FROM generate_series(1, %s)",
            [size],
        )
        conn.execute("VACUUM ANALYZE jobqueue_job")
        for mode in ("force_custom_plan", "force_generic_plan"):
            with conn.transaction(force_rollback=True):
                conn.execute(f"SET LOCAL plan_cache_mode = {mode}")
                conn.execute(f"PREPARE bench_claim AS {numbered}")
                lines = [
                    row[0] for row in conn.execute(f"EXPLAIN (ANALYZE) EXECUTE bench_claim({args})")
                ]
            conn.execute("DEALLOCATE bench_claim")  # not transactional
            found = {
                key: next((line for line in lines if line.strip().startswith(key)), "")
                for key in ("Planning Time", "Execution Time", "JIT")
            }
            print(
                f"| {size:,} | {mode.split('_')[1]} | "
                f"{found['Planning Time'].split(':')[-1].strip()} | "
                f"{found['Execution Time'].split(':')[-1].strip()} | "
                f"{'yes' if found['JIT'] else 'no'} |"
            )
    conn.close()


if __name__ == "__main__":
    main()
