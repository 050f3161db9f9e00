"""Core throughput and latency of jobqueue on PostgreSQL, beside the raw-SQL limit, in one run.

    .venv/bin/python bench/core.py [--jobs 20000] [--runs 3]

Recreates the database named by BENCH_DATABASE_URL (default
postgres://postgres@127.0.0.1:5432/jobqueue_bench), then prints, each the median of --runs:

* enqueue: jobs/s for ``jobqueue.enqueue`` with one job per transaction (autocommit), and for
  ``jobqueue.enqueue_many`` of 10,000 jobs in one call;
* drain: jobs/s for ``runworkers --burst`` on --jobs ready no-op jobs with 1 and 2 processes,
  both as wall time of the whole command (process start included) and as the span from the
  first claim to the last ack (database clock);
* pickup: p50/p99 of start - enqueue commit (database clock) for jobs enqueued one at a time
  into an idle worker;
* the limit: the same work in plain psycopg (one INSERT per transaction; claim 100 with
  FOR UPDATE SKIP LOCKED; one UPDATE acking 100), and each jobqueue figure as a fraction of it.

``bench/run_all.py`` runs these and every other figure (lateness, claim latency with history,
peers, latency under a backlog) into one table; the functions here are its building blocks.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

from _common import ROOT, bench_env, recreate_database

URL = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/jobqueue_bench")
ENV = bench_env(URL)
NOOP = "tests.testapp.jobs.noop"

#: The raw-SQL limit runs on a copy of the jobs table (same columns, indexes and storage
#: parameters, no NOTIFY trigger), so the trigger's cost counts against jobqueue, not the limit.
RAW_TABLE = "bench_raw_job"


def setup_database() -> None:
    recreate_database(URL, ENV)


def django_setup() -> None:
    import django

    django.setup()


def sql(statement: str, params: list | None = None) -> list[tuple]:
    """Run one statement on Django's connection (autocommit) and return its rows, if any."""
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute(statement, params)
        return cur.fetchall() if cur.description else []


def truncate() -> None:
    sql("TRUNCATE jobqueue_job, jobqueue_worker RESTART IDENTITY")


def bulk_ready(n: int, queue: str = "bench", history: bool = False) -> None:
    """Insert n no-op jobs in one statement (setup, not measured): ready, or with ``history``
    succeeded an hour ago (retained finished rows)."""
    state, finished = ("succeeded", "now() - interval '1 hour'") if history else ("ready", "NULL")
    sql(
        "INSERT INTO jobqueue_job (queue, type, payload, priority, tenant_id, state, run_at,"
        " attempts, max_attempts, timeout_s, leased_by, errors, dead_reason, created_at,"
        f" finished_at) SELECT %s, %s, '{{}}', 0, '', '{state}', now(), 0, 8, 30, '', '[]', '',"
        f" now(), {finished} FROM generate_series(1, %s)",
        [queue, NOOP, n],
    )
    sql("ANALYZE jobqueue_job")


def runworkers(*flags: str, settings: str | None = None) -> subprocess.Popen:
    env = {**ENV, **({"JOBQUEUE_SETTINGS": settings} if settings else {})}
    cmd = [sys.executable, "-m", "django", "runworkers", "--no-scheduler", *flags]
    return subprocess.Popen(cmd, env=env, cwd=ROOT)


def stop(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        proc.terminate()
    for proc in procs:
        proc.wait()


def wait_until_done(n: int, timeout_s: float, queue: str | None = None) -> None:
    where = "" if queue is None else f" AND queue = '{queue}'"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        [(done,)] = sql(f"SELECT count(*) FROM jobqueue_job WHERE state = 'succeeded'{where}")
        if done >= n:
            return
        time.sleep(0.05)
    raise SystemExit(f"only {done} of {n} jobs succeeded within {timeout_s:.0f} s")


def percentile(values: list[float], p: float) -> float:
    values = sorted(values)
    index = min(len(values) - 1, max(0, round(p / 100 * (len(values) - 1))))
    return values[index]


# -- figures ---------------------------------------------------------------------------------


def bench_enqueue(n: int) -> float:
    """Return jobs/s of ``enqueue`` with one job per transaction (autocommit)."""
    import jobqueue

    truncate()
    start = time.perf_counter()
    for i in range(n):
        jobqueue.enqueue("bench", NOOP, {"i": i})
    return n / (time.perf_counter() - start)


def bench_enqueue_many(n: int) -> float:
    """Return jobs/s of one ``enqueue_many`` call of n jobs (validation included)."""
    import jobqueue

    truncate()
    jobs = [{"queue": "bench", "job_type": NOOP, "payload": {"i": i}} for i in range(n)]
    start = time.perf_counter()
    ids = jobqueue.enqueue_many(jobs)
    elapsed = time.perf_counter() - start
    assert len(ids) == n
    return n / elapsed


def bench_drain(n: int, processes: int, concurrency: int = 10) -> tuple[float, float]:
    """Return (jobs/s wall, jobs/s span) of ``runworkers --burst`` on n ready jobs
    (``concurrency`` 0: no ``--concurrency``, the default)."""
    truncate()
    bulk_ready(n)
    given = ("--concurrency", str(concurrency)) if concurrency else ()
    flags = ("--queues", "bench", "--burst", *given)
    start = time.perf_counter()
    procs = [runworkers(*flags) for _ in range(processes)]
    for proc in procs:
        proc.wait()
    wall = time.perf_counter() - start
    [(done, span)] = sql(
        "SELECT count(*) FILTER (WHERE state = 'succeeded'),"
        " extract(epoch FROM max(finished_at) - min(started_at)) FROM jobqueue_job"
    )
    if done != n:
        raise SystemExit(f"drain: only {done} of {n} jobs succeeded")
    return n / wall, n / float(span)


def bench_pickup(samples: int, gap_s: float, settings: str | None = None) -> tuple[float, float]:
    """Return (p50, p99) ms of start - enqueue commit, jobs enqueued ``gap_s`` apart."""
    import jobqueue

    truncate()
    proc = runworkers("--queues", "bench", settings=settings)
    try:
        # A warm-up job, not counted: the samples start once the worker has run it, however
        # long the loaded machine takes to start the process.
        warm_up = jobqueue.enqueue("bench", NOOP, {})
        wait_until_done(1, 120)
        time.sleep(0.5)  # idle again
        for i in range(samples):
            # Autocommit: the statement's now() (created_at) is within microseconds of commit.
            jobqueue.enqueue("bench", NOOP, {"i": i})
            time.sleep(gap_s)
        wait_until_done(samples + 1, 30)
    finally:
        stop([proc])
    delays = [
        float(r[0]) * 1000
        for r in sql(
            "SELECT extract(epoch FROM started_at - created_at) FROM jobqueue_job WHERE id <> %s",
            [warm_up],
        )
    ]
    return percentile(delays, 50), percentile(delays, 99)


def bench_claim_latency(history: int, claims: int = 300, batch: int = 10) -> tuple[float, float]:
    """Return (p50, p99) ms of one ``Store.claim`` of ``batch`` jobs beside ``history`` finished
    rows; each claim is acked at once (``finish_many``), as a worker would."""
    from jobqueue.store import get_store

    try:
        from jobqueue.store.finishing import ack_outcome
    except ImportError:  # a --baseline checkout from before finish_many (a0cb57f and older)
        ack_outcome = None

    truncate()
    if history:
        # In steps of a million, so one statement's memory stays bounded.
        for start in range(0, history, 1_000_000):
            bulk_ready(min(1_000_000, history - start), history=True)
    bulk_ready(claims * batch)
    sql("VACUUM ANALYZE jobqueue_job")
    store = get_store()
    times = []
    for _ in range(claims):
        start = time.perf_counter()
        claimed = store.claim(["bench"], "bench-worker", batch, 30.0)
        times.append((time.perf_counter() - start) * 1000)
        if ack_outcome is None:
            store.ack_many([(job.id, job.lease_token, "null") for job in claimed])
        else:
            store.finish_many([ack_outcome(job.id, job.lease_token, "null") for job in claimed])
    return percentile(times, 50), percentile(times, 99)


def bench_backlog_latency(
    backlog: int, samples: int, gap_s: float, processes: int = 2
) -> tuple[float, float]:
    """Return (p50, p99) ms of start - enqueue for jobs of queue ``urgent`` enqueued ``gap_s``
    apart while ``processes`` workers serving ``bulk,urgent`` drain ``backlog`` jobs of ``bulk``."""
    import jobqueue

    truncate()
    bulk_ready(backlog, queue="bulk")
    procs = [runworkers("--queues", "bulk,urgent") for _ in range(processes)]
    try:
        # Sample only once every process is draining: a fixed 2 s was shorter than a worker's
        # start on a loaded machine (5-7 s at load 25), so the first samples waited for the
        # workers to start, not for the backlog (p50 1.7 s, p99 5.5 s; 1-68 ms once both ran).
        wait_draining(processes, 300, queue="bulk")
        ids = []
        for i in range(samples):
            ids.append(jobqueue.enqueue("urgent", NOOP, {"i": i}))
            time.sleep(gap_s)
        wait_until_done(samples, 300, queue="urgent")
        [(bulk_left,)] = sql(
            "SELECT count(*) FROM jobqueue_job WHERE queue = 'bulk' AND state <> 'succeeded'"
        )
    finally:
        stop(procs)
    if bulk_left == 0:
        print("  (note: the backlog was drained before the last sample ran)", file=sys.stderr)
    delays = [
        float(r[0]) * 1000
        for r in sql(
            "SELECT extract(epoch FROM started_at - created_at) FROM jobqueue_job"
            " WHERE queue = 'urgent'"
        )
    ]
    return percentile(delays, 50), percentile(delays, 99)


def wait_draining(processes: int, timeout_s: float, queue: str) -> None:
    """Return once ``processes`` workers have each claimed a job of ``queue``, then 0.5 s more
    (a few claims each); raise SystemExit after ``timeout_s`` (a hang guard)."""
    deadline = time.monotonic() + timeout_s
    while True:
        [(workers,)] = sql(
            "SELECT count(DISTINCT leased_by) FROM jobqueue_job WHERE queue = %s"
            " AND state IN ('leased', 'succeeded')",
            [queue],
        )
        if workers >= processes:
            time.sleep(0.5)
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"only {workers} of {processes} workers draining {queue}")
        time.sleep(0.1)


def raw_limit(n: int, inserts: int | None = None) -> dict[str, float]:
    """Return the plain-psycopg limit, jobs/s: ``insert`` (one INSERT per transaction, timed
    over ``inserts`` jobs), ``claim`` (FOR UPDATE SKIP LOCKED claims of 100), ``ack`` (one
    UPDATE acking 100), and ``drain`` (claim + ack together), over n jobs."""
    inserts = n if inserts is None else min(inserts, n)
    import psycopg

    with psycopg.connect(URL, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {RAW_TABLE}")
        conn.execute(f"CREATE TABLE {RAW_TABLE} (LIKE jobqueue_job INCLUDING ALL)")
        start = time.perf_counter()
        for i in range(inserts):
            conn.execute(
                f"INSERT INTO {RAW_TABLE} (queue, type, payload, priority, tenant_id, state,"
                " run_at, attempts, max_attempts, timeout_s, leased_by, errors, dead_reason,"
                " created_at) VALUES ('bench', 'noop', %s, 0, '', 'ready', now(), 0, 8, 30, '',"
                " '[]', '', now())",
                [f'{{"i": {i}}}'],
            )
        insert_rate = inserts / (time.perf_counter() - start)
        # The rest of the n jobs for the claim and ack part, in one statement (not timed).
        conn.execute(
            f"INSERT INTO {RAW_TABLE} (queue, type, payload, priority, tenant_id, state, run_at,"
            " attempts, max_attempts, timeout_s, leased_by, errors, dead_reason, created_at)"
            " SELECT 'bench', 'noop', '{}', 0, '', 'ready', now(), 0, 8, 30, '', '[]', '', now()"
            " FROM generate_series(1, %s)",
            [n - inserts],
        )
        conn.execute(f"ANALYZE {RAW_TABLE}")
        claim_s = ack_s = 0.0
        done = 0
        while True:
            t0 = time.perf_counter()
            rows = conn.execute(
                f"WITH picked AS (SELECT id FROM {RAW_TABLE} WHERE queue = 'bench'"
                " AND state IN ('ready','scheduled') AND run_at <= now()"
                " ORDER BY priority DESC, run_at, id LIMIT 100 FOR UPDATE SKIP LOCKED)"
                f" UPDATE {RAW_TABLE} j SET state = 'leased', attempts = j.attempts + 1,"
                " lease_token = gen_random_uuid(), lease_until = now() + interval '30 s'"
                " FROM picked WHERE j.id = picked.id RETURNING j.id, j.lease_token"
            ).fetchall()
            t1 = time.perf_counter()
            claim_s += t1 - t0
            if not rows:
                break
            conn.execute(
                f"UPDATE {RAW_TABLE} SET state = 'succeeded', finished_at = now(),"
                " lease_token = NULL WHERE id = ANY(%s) AND state = 'leased'",
                [[r[0] for r in rows]],
            )
            ack_s += time.perf_counter() - t1
            done += len(rows)
        conn.execute(f"DROP TABLE {RAW_TABLE}")
    return {
        "insert": insert_rate,
        "claim": done / claim_s,
        "ack": done / ack_s,
        "drain": done / (claim_s + ack_s),
    }


def median_of(runs: int, fn: Callable, *args):
    """Run ``fn(*args)`` ``runs`` times; return (median, min, max), element-wise for tuples and
    dicts."""
    return summarize([fn(*args) for _ in range(runs)])


def summarize(results: list):
    """Return (median, min, max) of one figure's results, element-wise for tuples (or lists,
    as they come back from JSON) and dicts."""
    first = results[0]
    if isinstance(first, dict):
        return {key: summarize([r[key] for r in results]) for key in first}
    if isinstance(first, tuple | list):
        return tuple(summarize([r[i] for r in results]) for i in range(len(first)))
    return statistics.median(results), min(results), max(results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--pickup-samples", type=int, default=500)
    args = parser.parse_args()
    setup_database()
    django_setup()
    enqueue = median_of(args.runs, bench_enqueue, min(args.jobs, 5000))[0]
    many = median_of(args.runs, bench_enqueue_many, 10_000)[0]
    drain1 = median_of(args.runs, bench_drain, args.jobs, 1)
    drain2 = median_of(args.runs, bench_drain, args.jobs, 2)
    raw = median_of(args.runs, raw_limit, args.jobs)
    p50, p99 = median_of(args.runs, bench_pickup, args.pickup_samples, 0.01)
    print(f"{'figure':<48} {'jobqueue':>12} {'raw SQL':>12} {'fraction':>9}")
    rows = [
        ("enqueue, 1 job/transaction (jobs/s)", enqueue, raw["insert"][0]),
        ("enqueue_many of 10,000 (jobs/s)", many, raw["insert"][0]),
        ("drain --burst, 1 process x 10 (jobs/s, wall)", drain1[0][0], raw["drain"][0]),
        ("drain --burst, 1 process x 10 (jobs/s, span)", drain1[1][0], raw["drain"][0]),
        ("drain --burst, 2 processes x 10 (jobs/s, wall)", drain2[0][0], raw["drain"][0]),
        ("drain --burst, 2 processes x 10 (jobs/s, span)", drain2[1][0], raw["drain"][0]),
    ]
    for label, ours, limit in rows:
        print(f"{label:<48} {ours:>12,.0f} {limit:>12,.0f} {ours / limit:>9.2f}")
    print(f"{'pickup on an idle worker, p50 / p99 (ms)':<48} {p50[0]:>6.1f} / {p99[0]:<6.1f}")


if __name__ == "__main__":
    main()
