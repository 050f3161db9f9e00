"""Rate limits (issue 18): what a limit costs the claim, and how accurately it holds.

    .venv/bin/python bench/limits.py [--quick] [--drain-jobs 20000] [--seconds 60] [--parts cost]

Recreates the database named by BENCH_DATABASE_URL (default
postgres://postgres@127.0.0.1:5432/jq_limits), runs, and drops it. Every time is by the database
clock (the jobs' started_at and finished_at), never by this process's.

1. Cost: ``runworkers --processes 2 --concurrency 8 --burst`` draining --drain-jobs ready no-op
   jobs (one INSERT), (a) without limits, (b) with a non-binding type limit on them (1,000,000/s),
   (c) spread over 100 tenants with a non-binding tenant default (100 buckets), (d) 100 tenants
   and no limit (the baseline of c). Reports jobs/s over the span first claim -> last ack, and
   each as a fraction of its baseline.
2. Accuracy: 4 processes x 10 slots, a 20/s limit (burst 5) on no-op jobs with a backlog larger
   than --seconds can drain; counts admissions (started_at) in every 5 s window of --seconds from
   the first start. Goal: every window 20/s +- 10 %.
3. Bursts: 1,000 ready no-op jobs over a 5/s limit (burst 5), for 12 s: the most jobs started in
   any interval [t1, t2] between two starts, beyond 5 * (t2 - t1). Goal: at most the burst (5).
4. Explain (``--parts explain``, not run by default): the claim as sent, over 5,000 ready jobs,
   EXPLAIN ANALYZE in a rolled-back transaction, alternating with and without (b) the type
   limit and (c) the tenant default (buckets full): the database's planning and execution
   medians, less noisy on a loaded machine than the drains' jobs/s.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time

from _common import ROOT, bench_env, recreate_database

URL = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/jq_limits")
ENV = bench_env(URL)
NOOP = "tests.testapp.jobs.noop"
SETTINGS = {"POLL_INTERVAL_SECONDS": 1.0}


def query(sql: str, params: dict | None = None) -> list[tuple]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall() if cursor.description else []


def reset(n: int, tenants: int = 0) -> None:
    query("TRUNCATE jobqueue_job, jobqueue_worker, jobqueue_rate_limit RESTART IDENTITY")
    query(
        "INSERT INTO jobqueue_job (queue, type, payload, priority, tenant_id, state, run_at,"
        " attempts, max_attempts, timeout_s, leased_by, errors, dead_reason, created_at)"
        " SELECT 'rl', %(type)s, '{}'::jsonb, 0,"
        " CASE WHEN %(tenants)s = 0 THEN '' ELSE 't' || (g %% %(tenants)s) END,"
        " 'ready', now(), 0, 8, 30, '', '[]', '', now() FROM generate_series(1, %(n)s) AS g",
        {"type": NOOP, "tenants": tenants, "n": n},
    )
    query("ANALYZE jobqueue_job")


def workers(processes: int, slots: int, limits: dict | None, *flags: str) -> subprocess.Popen:
    settings = {**SETTINGS, **({"RATE_LIMITS": limits} if limits else {})}
    env = {**ENV, "JOBQUEUE_SETTINGS": json.dumps(settings)}
    cmd = [
        sys.executable, "-m", "django", "runworkers", "--queues", "rl", "--processes",
        str(processes), "--concurrency", str(slots), "--no-scheduler", *flags,
    ]  # fmt: skip
    return subprocess.Popen(
        cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def starts() -> list[float]:
    rows = query(
        "SELECT extract(epoch FROM started_at)::float8 FROM jobqueue_job"
        " WHERE started_at IS NOT NULL ORDER BY started_at"
    )
    return [t for (t,) in rows]


def drain(n: int, tenants: int, limits: dict | None) -> float:
    reset(n, tenants)
    proc = workers(2, 8, limits, "--burst")
    proc.wait(900)
    [(done, span)] = query(
        "SELECT count(*) FILTER (WHERE state = 'succeeded'),"
        " extract(epoch FROM max(finished_at) - min(started_at))::float8 FROM jobqueue_job"
    )
    if done != n:
        raise SystemExit(f"drain: {done} of {n} succeeded")
    print(
        f"  ... drained {n:,} ({tenants} tenants, limits {limits}): {n / span:,.0f} jobs/s",
        flush=True,
    )
    return n / span


def cost(cfg: argparse.Namespace) -> None:
    n = cfg.drain_jobs
    print(f"\n1. cost: runworkers --processes 2 --concurrency 8 --burst draining {n:,} no-op jobs")
    free = {"rate": "1000000/s", "burst": 1000000}
    a = drain(n, 0, None)
    b = drain(n, 0, {"type": {NOOP: free}})
    d = drain(n, 100, None)
    c = drain(n, 100, {"tenant": {"default": free}})
    print(f"  (a) no limits                         {a:8,.0f} jobs/s")
    print(f"  (b) type limit, non-binding           {b:8,.0f} jobs/s  ({b / a:.2f} of a)")
    print(f"  (d) 100 tenants, no limits            {d:8,.0f} jobs/s")
    print(f"  (c) 100 tenants, tenant default limit {c:8,.0f} jobs/s  ({c / d:.2f} of d)")


def explain(cfg: argparse.Namespace) -> None:
    """The claim as sent, in the database: EXPLAIN ANALYZE medians, with and without limits."""
    from django.db import transaction

    from jobqueue.settings.rates import parse_rate_limits
    from jobqueue.store.plan import ClaimPlan
    from jobqueue.store.shared import claim_params
    from jobqueue.store.sqltext import sql

    reps = 9 if cfg.quick else 31
    print(f"\n4. explain: one claim of 8 over 5,000 ready jobs, EXPLAIN ANALYZE x {reps}, medians")
    free = {"rate": "1000000/s", "burst": 1000000}
    for label, tenants, spec in (
        ("(b) type limit", 0, {"type": {NOOP: free}}),
        ("(c) 100 tenants, tenant default", 100, {"tenant": {"default": free}}),
    ):
        reset(5000, tenants)
        rates = parse_rate_limits(spec)
        keys = sorted(rates.static()) + [f"tenant:t{i}" for i in range(tenants)]
        query(
            "INSERT INTO jobqueue_rate_limit (key, tokens, refreshed_at)"
            " SELECT unnest(%(keys)s::text[]), 1000000, now()",
            {"keys": keys},
        )
        plan = ClaimPlan.even(1)
        times: dict[str, tuple[list[float], list[float]]] = {"none": ([], []), "rates": ([], [])}
        for rep in range(reps):
            for name in ("none", "rates") if rep % 2 else ("rates", "none"):
                params = {
                    "queues": ["rl"], "weights": [1.0], "start": [0.0], "strict": False,
                    "default_cap": None, "cap_tenants": [], "cap_values": [],
                    "tenant_weights": "{}", "limits": "{}", "worker_id": "w", "max_jobs": 8,
                    "lease_s": 30.0, "now": None,
                    **claim_params(rates if name == "rates" else plan.rates),
                }  # fmt: skip
                text = sql("claim" if name == "rates" else "claim~rates")
                with transaction.atomic():
                    lines = "\n".join(r for (r,) in query("EXPLAIN (ANALYZE) " + text, params))
                    transaction.set_rollback(True)
                for part, found in zip(times[name], ("Planning", "Execution"), strict=True):
                    part.append(float(re.search(found + r" Time: ([\d.]+)", lines).group(1)))
        for name, (planning, execution) in times.items():
            print(
                f"  {label:34s} {name:5s} planning {statistics.median(planning):6.2f} ms,"
                f" execution {statistics.median(execution):6.2f} ms"
            )


def accuracy(cfg: argparse.Namespace) -> None:
    seconds = cfg.seconds
    print(
        f"\n2. accuracy: 4 processes x 10 slots, 20/s (burst 5), {seconds:.0f} s from first start"
    )
    reset(int(20 * seconds * 1.5))
    proc = workers(4, 10, {"type": {NOOP: {"rate": "20/s", "burst": 5}}})
    try:
        deadline = time.monotonic() + seconds + 120
        while time.monotonic() < deadline:
            times = starts()
            if times and times[-1] - times[0] >= seconds + 0.5:
                break
            time.sleep(1)
    finally:
        stop(proc)
    times = starts()
    first = times[0]
    windows = [
        sum(1 for t in times if first + 5 * k <= t < first + 5 * (k + 1)) / 5
        for k in range(int(seconds // 5))
    ]
    ok = all(18 <= w <= 22 for w in windows)
    print(f"  per-second rate in each 5 s window: min {min(windows):.1f}, max {max(windows):.1f}")
    print(f"  windows: {', '.join(f'{w:.1f}' for w in windows)}  {'PASS' if ok else 'MISS'}")


def bursts(cfg: argparse.Namespace) -> None:
    print("\n3. bursts: 1,000 jobs over 5/s (burst 5), 12 s")
    reset(1000)
    proc = workers(4, 10, {"type": {NOOP: "5/s"}})
    try:
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline:
            times = starts()
            if times and times[-1] - times[0] >= 12:
                break
            time.sleep(1)
    finally:
        stop(proc)
    times = starts()
    excess = max(
        j - i + 1 - 5 * (times[j] - times[i])
        for i in range(len(times))
        for j in range(i, len(times))
    )
    rate = (len(times) - 5) / (times[-1] - times[0])
    print(f"  {len(times)} started; most beyond 5/s in any interval: {excess:.2f} (goal <= 5)")
    print(f"  rate after the first burst: {rate:.2f}/s  {'PASS' if excess <= 5.05 else 'MISS'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--drain-jobs", type=int, default=None)
    parser.add_argument("--seconds", type=float, default=None)
    parser.add_argument("--parts", default="cost,accuracy,bursts", help="which parts, by name")
    cfg = parser.parse_args()
    cfg.drain_jobs = cfg.drain_jobs or (5_000 if cfg.quick else 20_000)
    cfg.seconds = cfg.seconds or (20.0 if cfg.quick else 60.0)
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    recreate_database(URL, ENV)
    import django

    django.setup()
    try:
        [(pg,)] = query("SHOW server_version")
        print(f"jobqueue rate-limit bench: PostgreSQL {pg}, {os.cpu_count()} cores")
        parts = {"cost": cost, "accuracy": accuracy, "bursts": bursts, "explain": explain}
        for name in cfg.parts.split(","):
            parts[name](cfg)
    finally:
        import psycopg
        from django.db import connections

        connections.close_all()
        base, _, name = URL.rpartition("/")
        with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    main()
