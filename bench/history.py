"""Cost as history grows (issue 15): claim + ack and enqueue per job, empty and beside N retained
finished rows; the claim's plan and buffers; then pruning's rate and WAL per job.

    .venv/bin/python bench/history.py [--rows 10000000] [--payload-bytes 512] [--jobs 3000]
                                      [--runs 3] [--keep-days 7] [--no-prune]

Recreates its own database (HISTORY_DATABASE_URL, default .../jobqueue_history), then:

1. on the empty store, ``--runs`` times: ``jobqueue.enqueue`` of ``--jobs`` no-op jobs one per
   transaction, then ``Store.claim`` of 10 + ``Store.finish_many`` (the ack) until they are all
   done; the medians are printed as microseconds per job (and the claim's p50 in ms), and one
   claim is shown by ``EXPLAIN (ANALYZE, BUFFERS)``: its shared buffers and whether any node
   scans ``jobqueue_job`` without a partial index of live rows;
2. loads ``--rows`` finished jobs in statements of a million (``INSERT … SELECT generate_series``:
   94% succeeded, 4% dead with an error entry, 2% cancelled; four queues, the measured one among
   them; a ``--payload-bytes`` string in each payload; finished over the last ``keep_days + 1``
   days, oldest first, so about 1 in ``keep_days + 1`` is past retention), then
   ``VACUUM ANALYZE`` and ``CHECKPOINT``;
3. measures (1) again and prints each figure's ratio to empty (goal: <= 1.2);
4. unless ``--no-prune``: runs ``manage.py prunejobs --older-than {keep_days}d --state
   succeeded,dead,cancelled`` (the project's own pruning, default batch size) and prints jobs
   pruned per second and WAL bytes per job pruned (``pg_current_wal_lsn()`` before and after),
   then the same for the ``VACUUM`` that reclaims the deleted rows, and the headroom over the
   design volume of 50M jobs a day (579 jobs/s).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _common import ROOT, bench_env, recreate_database

URL = os.environ.get("HISTORY_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/jobqueue_history")
ENV = bench_env(URL)
NOOP = "tests.testapp.jobs.noop"
STEP = 1_000_000
"""Rows per loading statement: one statement's memory stays bounded."""

DESIGN_JOBS_PER_DAY = 50_000_000
FULL, EMPTY = "default", "queues2"
"""Aliases: the database loaded with history (HISTORY_DATABASE_URL), and an empty one beside it
(tests/settings.py names it ``<name>_queues2``), measured in turns so both see the same load."""


def sql(statement: str, params: list | dict | None = None, using: str = FULL) -> list[tuple]:
    """Run one statement on alias ``using`` (autocommit) and return its rows, if any."""
    from django.db import connections

    with connections[using].cursor() as cur:
        cur.execute(statement, params)
        return cur.fetchall() if cur.description else []


def lsn() -> int:
    """Return the current WAL insert position, bytes."""
    [(value,)] = sql("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint")
    return int(value)


def load_history(rows: int, payload_bytes: int, keep_days: float, first: int = 1) -> float:
    """Insert finished jobs ``first`` .. ``rows`` of the mix in the module docstring (job g
    finished ``(rows - g) / rows`` of the span ago); return seconds taken."""
    span_s = (keep_days + 1) * 86400.0
    began = time.perf_counter()
    for start in range(first, rows + 1, STEP):
        last = min(rows, start + STEP - 1)
        sql(
            "INSERT INTO jobqueue_job (queue, type, payload, priority, tenant_id, state, run_at,"
            " attempts, max_attempts, timeout_s, leased_by, errors, dead_reason, result,"
            " created_at, started_at, finished_at)"
            " SELECT (ARRAY['bench', 'default', 'email', 'reports'])[1 + g %% 4],"
            "  (ARRAY['app.jobs.send_email', 'app.jobs.render', 'app.jobs.sync', 'app.jobs.bill'])"
            "[1 + g %% 4],"
            "  jsonb_build_object('i', g,"
            "   'body', repeat(chr((97 + g %% 26)::int), %(payload)s::int)),"
            "  0, '', s.state, f.at - interval '2 seconds',"
            "  CASE s.state WHEN 'dead' THEN 8 WHEN 'cancelled' THEN 0 ELSE 1 END, 8, 30, '',"
            "  CASE WHEN s.state = 'dead' THEN jsonb_build_array(jsonb_build_object("
            "   'attempt', 8, 'error', 'ConnectionError: upstream timed out',"
            "   'traceback', repeat('  File \"app/jobs.py\", line 42, in sync\n', 6))) "
            "  ELSE '[]'::jsonb END,"
            "  CASE s.state WHEN 'dead' THEN 'max_attempts' ELSE '' END,"
            "  CASE WHEN s.state = 'succeeded' THEN '{\"ok\": true}'::jsonb END,"
            "  f.at - interval '3 seconds', f.at - interval '1 second', f.at"
            " FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS g"
            " CROSS JOIN LATERAL (SELECT now() - make_interval(secs =>"
            "   (%(rows)s - g) * %(span)s / %(rows)s) AS at) AS f"
            " CROSS JOIN LATERAL (SELECT CASE WHEN g %% 50 = 7 THEN 'cancelled'"
            "   WHEN g %% 25 = 3 THEN 'dead' ELSE 'succeeded' END AS state) AS s",
            {"first": start, "last": last, "rows": rows, "span": span_s, "payload": payload_bytes},
        )
        print(f"  loaded {last:,} rows ({time.perf_counter() - began:.0f} s)", flush=True)
    return time.perf_counter() - began


def measure_once(jobs: int, batch: int, using: str) -> tuple[float, float, float]:
    """Enqueue ``jobs`` no-op jobs one per transaction, then claim ``batch`` at a time and ack
    each claim; return (enqueue µs/job, claim + ack µs/job, claim p50 ms)."""
    import jobqueue
    from jobqueue.store import get_store
    from jobqueue.store.finishing import ack_outcome

    store = get_store(using)
    start = time.perf_counter()
    for i in range(jobs):
        jobqueue.enqueue("bench", NOOP, {"i": i}, using=using)
    enqueue_us = (time.perf_counter() - start) / jobs * 1e6
    claims: list[float] = []
    done = 0
    start = time.perf_counter()
    while done < jobs:
        t0 = time.perf_counter()
        claimed = store.claim(["bench"], "bench-worker", batch, 30.0)
        claims.append((time.perf_counter() - t0) * 1000)
        if not claimed:
            raise SystemExit(f"claim came back empty after {done} of {jobs} jobs")
        store.finish_many([ack_outcome(job.id, job.lease_token, "null") for job in claimed])
        done += len(claimed)
    claim_us = (time.perf_counter() - start) / jobs * 1e6
    return enqueue_us, claim_us, statistics.median(claims)


def measure(jobs: int, runs: int) -> dict[str, dict[str, float]]:
    """Run :func:`measure_once` (batches of 10) ``runs`` times on each alias, in turns; return
    each alias's medians."""
    results: dict[str, list[tuple[float, float, float]]] = {EMPTY: [], FULL: []}
    for _ in range(runs):
        for using in (EMPTY, FULL):
            results[using].append(measure_once(jobs, 10, using))
            print(f"  {using}: {results[using][-1]}", flush=True)
    return {
        using: {
            "enqueue_us": statistics.median(r[0] for r in rows),
            "claim_ack_us": statistics.median(r[1] for r in rows),
            "claim_p50_ms": statistics.median(r[2] for r in rows),
        }
        for using, rows in results.items()
    }


def explain_claim(using: str) -> dict[str, object]:
    """Explain (ANALYZE, BUFFERS) one claim of 10 as the store sends it, rolled back.

    Returns:
        ``buffers`` (shared hit + read of the whole statement), ``ms`` (execution time),
        ``relations`` (each scan node on jobqueue_job: its type and index) and ``plan`` (text).
    """
    from django.db import connections, transaction
    from django.test.utils import CaptureQueriesContext

    import jobqueue
    from jobqueue.store import get_store

    for i in range(20):
        jobqueue.enqueue("bench", NOOP, {"i": i}, using=using)
    with transaction.atomic(using=using):
        with CaptureQueriesContext(connections[using]) as captured:
            get_store(using).claim(["bench"], "bench-worker", 10, 30.0)
        transaction.set_rollback(True, using=using)
    text = next(q["sql"] for q in captured.captured_queries if "WITH RECURSIVE" in q["sql"])
    text = text[text.index("WITH RECURSIVE") :]
    with transaction.atomic(using=using):
        [(plan,)] = sql(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {text}", using=using)
        rows = sql(f"EXPLAIN (ANALYZE, BUFFERS) {text}", using=using)
        transaction.set_rollback(True, using=using)
    plan_text = "\n".join(r[0] for r in rows)
    plan = plan if isinstance(plan, list) else json.loads(plan)
    top = plan[0]["Plan"]
    scans: list[str] = []

    def walk(node: dict) -> None:
        if node.get("Relation Name") == "jobqueue_job":
            scans.append(f"{node['Node Type']} {node.get('Index Name', '')}".strip())
        for child in node.get("Plans", []):
            walk(child)

    walk(top)
    sql("DELETE FROM jobqueue_job WHERE state IN ('ready', 'scheduled')", using=using)
    return {
        "buffers": top.get("Shared Hit Blocks", 0) + top.get("Shared Read Blocks", 0),
        "ms": plan[0]["Execution Time"],
        "relations": sorted(set(scans)),
        "plan": plan_text,
    }


def prune(keep_days: float) -> dict[str, float]:
    """Run ``manage.py prunejobs`` on every finished state older than ``keep_days``, then
    ``VACUUM`` the table; return their rates and WAL bytes per job pruned."""
    before = lsn()
    start = time.perf_counter()
    out = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "prunejobs",
            "--older-than",
            f"{int(keep_days)}d",
            "--state",
            "succeeded,dead,cancelled",
        ],
        env=ENV,
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    prune_s = time.perf_counter() - start
    after = lsn()
    start = time.perf_counter()
    sql("VACUUM jobqueue_job")
    vacuum_s = time.perf_counter() - start
    vacuumed = lsn()
    # The command's own count: rows keep expiring while it runs.
    pruned = int(re.search(r"Deleted (\d+) ", out).group(1))
    return {
        "pruned": pruned,
        "prune_s": prune_s,
        "jobs_per_s": pruned / prune_s,
        "wal_per_job": (after - before) / pruned,
        "vacuum_s": vacuum_s,
        "vacuum_wal_per_job": (vacuumed - after) / pruned,
    }


def size() -> str:
    [(text,)] = sql("SELECT pg_size_pretty(pg_total_relation_size('jobqueue_job'))")
    return text


def recreate_empty() -> None:
    """Drop, create and migrate the empty database beside the loaded one (alias ``queues2``)."""
    import psycopg

    base, _, name = URL.rpartition("/")
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}_queues2" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}_queues2"')
    command = [sys.executable, "-m", "django", "migrate", "-v", "0", "--database", EMPTY]
    subprocess.run(command, env=ENV, check=True, cwd=ROOT)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--payload-bytes", type=int, default=512)
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keep-days", type=float, default=7.0)
    parser.add_argument("--no-prune", action="store_true")
    parser.add_argument(
        "--reuse", action="store_true", help="keep the loaded database; top it up to --rows"
    )
    parser.add_argument("--plan-file", default="/tmp/history_claim_plans.txt")
    args = parser.parse_args()
    if not args.reuse:
        recreate_database(URL, ENV)
    recreate_empty()
    import django

    django.setup()
    [(have,)] = sql("SELECT count(*) FROM jobqueue_job") if args.reuse else [(0,)]
    if have < args.rows:
        load_s = load_history(args.rows, args.payload_bytes, args.keep_days, first=have + 1)
        start = time.perf_counter()
        sql("VACUUM ANALYZE jobqueue_job")
        sql("CHECKPOINT")
        print(f"loaded in {load_s:.0f} s, VACUUM ANALYZE {time.perf_counter() - start:.0f} s")
    print(f"jobqueue_job: {size()}", flush=True)
    figures = measure(args.jobs, args.runs)
    empty, full = figures[EMPTY], figures[FULL]
    empty_plan, full_plan = explain_claim(EMPTY), explain_claim(FULL)
    print(f"\nhistory: {args.rows:,} finished rows, payload string {args.payload_bytes} B")
    print(f"{'':24} {'empty':>10} {f'{args.rows:,} rows':>14} {'ratio':>6}")
    for key, label in [
        ("enqueue_us", "enqueue, µs/job"),
        ("claim_ack_us", "claim 10 + ack, µs/job"),
        ("claim_p50_ms", "claim of 10, p50 ms"),
    ]:
        print(f"{label:24} {empty[key]:>10.1f} {full[key]:>14.1f} {full[key] / empty[key]:>6.2f}")
    print(f"{'claim, shared buffers':24} {empty_plan['buffers']:>10} {full_plan['buffers']:>14}")
    print(f"{'claim, execution ms':24} {empty_plan['ms']:>10.2f} {full_plan['ms']:>14.2f}")
    print(f"claim scans of jobqueue_job ({args.rows:,} rows): {', '.join(full_plan['relations'])}")
    Path(args.plan_file).write_text(f"{empty_plan['plan']}\n\n{full_plan['plan']}\n")
    print(f"the two plans (empty, then with history): {args.plan_file}")
    if args.no_prune:
        return
    result = prune(args.keep_days)
    need = DESIGN_JOBS_PER_DAY / 86400
    print(f"\nprunejobs --older-than {args.keep_days:g}d: {result['pruned']:,} jobs")
    print(
        f"  DELETE   {result['jobs_per_s']:>9,.0f} jobs/s  {result['wal_per_job']:>6.0f} WAL B/job"
    )
    vacuum_rate = result["pruned"] / result["vacuum_s"]
    print(f"  VACUUM   {vacuum_rate:>9,.0f} jobs/s  {result['vacuum_wal_per_job']:>6.0f} WAL B/job")
    both = result["pruned"] / (result["prune_s"] + result["vacuum_s"])
    print(f"  together {both:,.0f} jobs/s = {both / need:.1f}x the design volume ({need:.0f}/s)")
    print(f"  table after: {size()}")


if __name__ == "__main__":
    main()
