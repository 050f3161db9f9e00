"""Pickup under a trickle, hop by hop: where a job's time goes between ``enqueue`` and its start.

    .venv/bin/python bench/pickup_hops.py [--jobs 100] [--gap-ms 30] [--private]

Recreates BENCH_DATABASE_URL's database, starts one worker process (``Worker(queues=["bench"])``,
no services) whose listener, bell, claims and statements are stamped (wall clock, this machine),
enqueues ``--jobs`` jobs one at a time, and prints, per hop, p50 / p90 / p99 ms after the
``enqueue`` call began: the call returned, the notification reached the listener, the loop woke,
the claim began, its statement was sent and came back, the claim's jobs were handed to be
started, the first went to a handler thread, the worker sent its next statement, the executor
began, the handler started; then every statement the
worker sent while a job was on its way, with its count per job and its client-side time. The
stamping wraps functions of the worker (it changes nothing they do); the handler's start is its
own ``time.time()`` (``tests.testapp.jobs.started_at_wall``). With ``--private`` it runs on a
private cluster (``fsync=off``, pg_stat_statements) instead of BENCH_DATABASE_URL, and adds each
statement's server time (mean execution and planning per call, pg_stat_statements).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time

from _common import ROOT, bench_env, recreate_database

URL = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/jobqueue_bench")
STAMP = "tests.testapp.jobs.started_at_wall"
HOPS = (
    "returned",
    "notify",
    "woke",
    "claim_begin",
    "claim_sent",
    "claim_back",
    "claimed",
    "submit",
    "next_sent",
    "executor",
    "start",
)


def stamped_worker(path: str) -> None:
    """Run the worker with each hop stamped into ``path`` (JSON lines); until SIGTERM."""
    import django

    django.setup()
    import jobqueue.store.bounded as bounded
    import jobqueue.store.notify as notify
    import jobqueue.worker.claiming as claiming
    import jobqueue.worker.executor as executor
    import jobqueue.worker.starting as starting
    import jobqueue.worker.threads as threads
    import jobqueue.worker.wakeups as wakeups
    from jobqueue.worker.loop import Worker

    events: list[list] = []

    def wrap(owner, name, before=None, after=None):
        original = getattr(owner, name)

        def wrapped(*args, **kwargs):
            if before:
                events.append([before, time.time()])
            result = original(*args, **kwargs)
            if after and (after != "woke" or result):
                events.append([after, time.time()])
            return result

        setattr(owner, name, wrapped)

    wrap(notify.ReadyListener, "dispatch", before="notify")
    wrap(wakeups.WakeUps, "wait", after="woke")
    wrap(claiming.Claimer, "claim", before="claim_begin")
    wrap(claiming.Claimer, "_start", before="claimed")
    wrap(threads.HandlerThreads, "submit", before="submit")
    wrap(executor, "execute", before="executor")
    starting.execute = executor.execute  # imported by name there
    execute = bounded.execute

    def timed(alias, text, params=None):
        began = time.time()
        cursor = execute(alias, text, params)
        ended = time.time()
        events.append(["sql: " + " ".join(text.split())[:50], began, ended])
        if "jobqueue_claim_" in text[:40]:
            events.append(["claim_sent", began])
            events.append(["claim_back", ended])
        else:  # the worker's next statement after the claim (while the job starts)
            events.append(["next_sent", began])
        return cursor

    bounded.execute = timed

    def flush() -> None:
        with open(path, "a") as out:
            while True:
                time.sleep(0.2)
                batch = events[:]
                del events[: len(batch)]
                out.writelines(json.dumps(e) + "\n" for e in batch)
                out.flush()

    threading.Thread(target=flush, daemon=True).start()
    Worker(queues=["bench"]).run()


def percentile(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, max(0, round(p / 100 * (len(values) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--gap-ms", type=float, default=30.0)
    parser.add_argument("--private", action="store_true", help="on a private cluster")
    parser.add_argument("--worker", help=argparse.SUPPRESS)  # the stamped worker's own run
    args = parser.parse_args()
    if args.worker:
        bench_env(URL)
        stamped_worker(args.worker)
        return
    cluster = None
    if args.private:
        from _clusters import start_cluster

        cluster = start_cluster("jobqueue_bench")
        env = bench_env(cluster.url("jobqueue_bench"))
        env["BENCH_DATABASE_URL"] = os.environ["BENCH_DATABASE_URL"] = env["DATABASE_URL"]
        subprocess.run(
            [sys.executable, "-m", "django", "migrate", "-v", "0"], env=env, check=True, cwd=ROOT
        )
    else:
        env = bench_env(URL)
        recreate_database(URL, env)
    try:
        run(args, env, cluster is not None)
    finally:
        if cluster is not None:
            cluster.destroy()


def run(args: argparse.Namespace, env: dict[str, str], private: bool) -> None:
    """Enqueue the trickle to a stamped worker and print the hops (and, private, server times)."""
    import django

    django.setup()
    from django.db import connection

    import jobqueue

    def succeeded() -> int:
        with connection.cursor() as cur:
            cur.execute("SELECT count(*) FROM jobqueue_job WHERE state = 'succeeded'")
            return cur.fetchone()[0]

    path = f"/tmp/jobqueue-pickup-hops-{os.getpid()}.jsonl"
    cmd = [sys.executable, __file__, "--worker", path]
    if private:
        with connection.cursor() as cur:
            cur.execute("SELECT pg_stat_statements_reset()")
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stderr=subprocess.DEVNULL)
    try:
        time.sleep(3)
        jobqueue.enqueue("bench", STAMP, {})  # warm-up, not counted
        while succeeded() < 1:
            time.sleep(0.05)
        time.sleep(1)
        called: dict[int, float] = {}
        returned: dict[int, float] = {}
        next_at = time.monotonic()
        for _ in range(args.jobs):
            at = time.time()
            job_id = jobqueue.enqueue("bench", STAMP, {})
            called[job_id], returned[job_id] = at, time.time()
            next_at += args.gap_ms / 1000
            time.sleep(max(next_at - time.monotonic(), 0.0))
        while succeeded() < args.jobs + 1:
            time.sleep(0.05)
        time.sleep(1)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    with connection.cursor() as cur:
        cur.execute("SELECT id, result FROM jobqueue_job WHERE id = ANY(%s)", [list(called)])
        start = {i: float(json.loads(r) if isinstance(r, str) else r) for i, r in cur.fetchall()}
    with open(path) as f:
        events = sorted((json.loads(line) for line in f), key=lambda e: e[1])
    os.unlink(path)
    hops: dict[str, list[float]] = {hop: [] for hop in HOPS}
    statements: dict[str, list[float]] = {}
    for job_id, at in called.items():
        hops["returned"].append((returned[job_id] - at) * 1000)
        hops["start"].append((start[job_id] - at) * 1000)
        window = [e for e in events if at <= e[1] <= start[job_id] + 0.001]
        for hop in HOPS[1:-1]:
            stamps = [e[1] for e in window if e[0] == hop]
            if stamps:
                hops[hop].append((stamps[0] - at) * 1000)
        for e in window:
            if e[0].startswith("sql: "):
                statements.setdefault(e[0], []).append((e[2] - e[1]) * 1000)
    print(f"{args.jobs} jobs {args.gap_ms:g} ms apart; ms after enqueue was called")
    for hop, values in hops.items():
        if values:
            cells = " ".join(f"p{p} {percentile(values, p):7.2f}" for p in (50, 90, 99))
            print(f"  {hop:12s} (n {len(values):4d}) {cells}")
    print("statements sent while a job was on its way (count per job, client ms p50 / p99):")
    for text, values in sorted(statements.items(), key=lambda kv: -len(kv[1])):
        cells = f"{percentile(values, 50):6.2f} / {percentile(values, 99):6.2f}"
        print(f"  {len(values) / args.jobs:5.2f}  {cells}  {text}")
    if private:
        print("server time per call (pg_stat_statements, the whole run; calls, exec ms, plan ms):")
        with connection.cursor() as cur:
            cur.execute(
                "SELECT calls, mean_exec_time, mean_plan_time, query FROM pg_stat_statements"
                " WHERE calls >= %s AND query NOT ILIKE '%%pg_stat%%'"
                " ORDER BY calls * mean_exec_time DESC LIMIT 15",
                [args.jobs // 2],
            )
            for calls, exec_ms, plan_ms, query in cur.fetchall():
                text = " ".join(query.split())[:70]
                print(f"  {calls:6d} {exec_ms:7.3f} {plan_ms:7.3f}  {text}")


if __name__ == "__main__":
    main()
