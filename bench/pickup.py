"""Pickup under a trickle, and what idle worker processes cost the database server.

    .venv/bin/python bench/pickup.py [--jobs 200] [--gap-ms 20] [--runs 3]
                                     [--idle-processes 10] [--idle-s 20] [--pooler]
                                     [--only trickle|idle]

Recreates the database named by BENCH_DATABASE_URL (default
postgres://postgres@127.0.0.1:5432/jobqueue_bench), then prints:

* trickle: one idle ``runworkers`` process (no flags: its defaults), one warm-up job, then
  ``--jobs`` jobs enqueued one at a time, ``--gap-ms`` apart; pickup = the wall time at which
  the handler started (``time.time()`` in the handler) - the wall time at which ``enqueue`` was
  called (both on this machine's clock). p50, p99 and max per run, and the median of the runs;
* idle: ``runworkers --processes N`` with no job, once every process has registered and a few
  seconds have passed: for ``--idle-s`` seconds, the server CPU of the backends of the bench
  database (``pg_stat_activity``'s pids, user + system time from ``/proc/<pid>/stat``) and the
  transactions committed or rolled back (``pg_stat_database``), per process and per second, and
  the cores 1,000 such processes would take. With ``--pooler``, the same through a private
  PgBouncer in transaction mode (``tests/pgbouncer.py``; the workers LISTEN on a direct alias,
  ``POOLED_DATABASES``): its server connections are among the backends counted.

The server must run on this machine (``/proc`` of its backends), as the project's does.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from _common import ROOT, bench_env, recreate_database

URL = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/jobqueue_bench")
ENV = bench_env(URL)
STAMP = "tests.testapp.jobs.started_at_wall"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def sql(statement: str, params: list | None = None) -> list[tuple]:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute(statement, params)
        return cur.fetchall() if cur.description else []


def percentile(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, max(0, round(p / 100 * (len(values) - 1))))]


def runworkers(*flags: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "django", "runworkers", "--no-scheduler", *flags]
    return subprocess.Popen(cmd, env=env or ENV, cwd=ROOT)


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    proc.wait(timeout=60)


def wait_done(n: int, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        [(done,)] = sql("SELECT count(*) FROM jobqueue_job WHERE state = 'succeeded'")
        if done >= n:
            return
        time.sleep(0.02)
    raise SystemExit(f"only {done} of {n} jobs succeeded within {timeout_s:.0f} s")


def trickle(
    jobs: int, gap_s: float, env: dict[str, str] | None = None
) -> tuple[list[float], list[float]]:
    """Return each job's pickup (handler start - enqueue called) and its enqueue call, ms.

    The enqueue call (called to returned: the INSERT and its commit, which the notification
    waits for) is part of the pickup; the rest is the worker's (notification, claim, start).
    """
    import jobqueue

    sql("TRUNCATE jobqueue_job, jobqueue_worker RESTART IDENTITY")
    proc = runworkers("--queues", "bench", env=env)
    try:
        jobqueue.enqueue("bench", STAMP, {})  # warm-up, not counted
        wait_done(1)
        time.sleep(0.5)  # idle again
        called: dict[int, float] = {}
        enqueue_ms: list[float] = []
        next_at = time.monotonic()
        for _ in range(jobs):
            at = time.time()
            called[jobqueue.enqueue("bench", STAMP, {})] = at
            enqueue_ms.append((time.time() - at) * 1000)
            next_at += gap_s
            time.sleep(max(next_at - time.monotonic(), 0.0))
        wait_done(jobs + 1)
    finally:
        stop(proc)
    rows = sql("SELECT id, result FROM jobqueue_job WHERE id = ANY(%s)", [list(called)])
    pickup = [
        (float(json.loads(r) if isinstance(r, str) else r) - called[i]) * 1000 for i, r in rows
    ]
    return pickup, enqueue_ms


def backend_cpu_s(database: str) -> float:
    """Return the CPU seconds (user + system) the backends of ``database`` have used so far."""
    pids = [
        pid
        for (pid,) in sql(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            [database],
        )
    ]
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue  # ended meanwhile
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)
    return total / CLOCK_TICKS


def transactions(database: str) -> int:
    [(n,)] = sql(
        "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = %s", [database]
    )
    return int(n)


def idle(processes: int, seconds: float, env: dict[str, str]) -> dict[str, float]:
    """Return the idle cost of ``runworkers --processes N`` on the server, per process."""
    from django.db import connection

    database = connection.settings_dict["NAME"]
    sql("TRUNCATE jobqueue_job, jobqueue_worker RESTART IDENTITY")
    proc = runworkers("--queues", "bench", "--processes", str(processes), env=env)
    try:
        deadline = time.monotonic() + 120
        while sql("SELECT count(*) FROM jobqueue_worker")[0][0] < processes:
            if time.monotonic() > deadline:
                raise SystemExit("the worker processes did not all register within 120 s")
            time.sleep(0.2)
        time.sleep(3.0)  # start-up work done
        cpu0, tx0, t0 = backend_cpu_s(database), transactions(database), time.monotonic()
        time.sleep(seconds)
        cpu1, tx1, t1 = backend_cpu_s(database), transactions(database), time.monotonic()
        backends = len(sql("SELECT pid FROM pg_stat_activity WHERE datname = %s", [database]))
    finally:
        stop(proc)
    span = t1 - t0
    # Our own two reads add one transaction each.
    per_process_cpu = (cpu1 - cpu0) / span / processes
    return {
        "backends": backends - 1,
        "cpu_ms_per_s_per_process": per_process_cpu * 1000,
        "transactions_per_s_per_process": (tx1 - tx0 - 2) / span / processes,
        "cores_per_1000_processes": per_process_cpu * 1000,
    }


def pooled_env() -> tuple[dict[str, str], object]:
    """Return the environment of workers behind a private PgBouncer, and the bouncer."""
    from tests.pgbouncer import PrivateBouncer

    base, _, name = URL.rpartition("/")
    server_port = int(base.rsplit(":", 1)[1])
    bouncer = PrivateBouncer(server_port, default_pool_size=4, max_db_connections=8)
    bouncer.start()
    env = {
        **ENV,
        "DATABASE_URL": f"postgres://postgres@127.0.0.1:{bouncer.port}/{name}",
        "JOBQUEUE_DIRECT_URL": URL,
        "JOBQUEUE_SETTINGS": json.dumps(
            {
                "ENQUEUE_UNREGISTERED": True,
                "POOLED_DATABASES": {"default": {"LISTEN_DATABASE": "direct"}},
            }
        ),
    }
    return env, bouncer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--gap-ms", type=float, default=20.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--idle-processes", type=int, default=10)
    parser.add_argument("--idle-s", type=float, default=20.0)
    parser.add_argument("--pooler", action="store_true", help="also measure idle through PgBouncer")
    parser.add_argument("--only", choices=("trickle", "idle"))
    parser.add_argument("--no-setup", action="store_true", help="reuse the migrated database")
    parser.add_argument(
        "--compare-async",
        action="store_true",
        help="trickle runs alternate ASYNCHRONOUS_COMMIT on and off (the worker's setting)",
    )
    args = parser.parse_args()
    if not args.no_setup:
        recreate_database(URL, ENV)
    import django

    django.setup()
    if args.only in (None, "trickle"):
        ways = [("", None)]
        if args.compare_async:
            ways = [
                (
                    f" ASYNCHRONOUS_COMMIT {on}",
                    {
                        **ENV,
                        "JOBQUEUE_SETTINGS": json.dumps(
                            {"ENQUEUE_UNREGISTERED": True, "ASYNCHRONOUS_COMMIT": on}
                        ),
                    },
                )
                for on in (True, False)
            ]
        p50s: dict[str, list[float]] = {label: [] for label, _ in ways}
        p99s: dict[str, list[float]] = {label: [] for label, _ in ways}
        for run in range(args.runs):
            for label, env in ways if run % 2 == 0 else list(reversed(ways)):
                ms, enqueue_ms = trickle(args.jobs, args.gap_ms / 1000, env)
                p50, p99 = percentile(ms, 50), percentile(ms, 99)
                p50s[label].append(p50)
                p99s[label].append(p99)
                print(
                    f"trickle{label} run {run + 1}: {len(ms)} jobs {args.gap_ms:g} ms apart: "
                    f"pickup p50 {p50:.2f} ms, p99 {p99:.2f} ms, max {max(ms):.2f} ms; of which "
                    f"the enqueue call (insert + commit) p50 {percentile(enqueue_ms, 50):.2f} "
                    f"ms, p99 {percentile(enqueue_ms, 99):.2f} ms",
                    flush=True,
                )
        for label, _ in ways:
            print(
                f"trickle{label}, median of {args.runs} runs: p50 "
                f"{statistics.median(p50s[label]):.2f} ms, p99 "
                f"{statistics.median(p99s[label]):.2f} ms"
            )
    if args.only in (None, "idle"):
        modes = [("direct", ENV, None)]
        if args.pooler:
            env, bouncer = pooled_env()
            modes.append(("pgbouncer", env, bouncer))
        try:
            for mode, env, _ in modes:
                cost = idle(args.idle_processes, args.idle_s, env)
                print(
                    f"idle {mode}: {args.idle_processes} processes, {cost['backends']} backends: "
                    f"{cost['cpu_ms_per_s_per_process']:.3f} ms server CPU per second per process"
                    f" ({cost['cores_per_1000_processes']:.2f} cores per 1,000 processes), "
                    f"{cost['transactions_per_s_per_process']:.2f} transactions/s per process",
                    flush=True,
                )
        finally:
            for _, _, bouncer in modes:
                if bouncer is not None:
                    bouncer.stop()  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()
