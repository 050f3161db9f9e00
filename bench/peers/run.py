"""The peers' enqueue and drain figures, run in their own virtualenv (bench/.venv-peers).

    bench/.venv-peers/bin/python bench/peers/run.py --jobs 5000 --runs 3

Recreates PEERS_DATABASE_URL, then for django-tasks-db, Procrastinate and pgqueuer measures, each
the median of --runs: enqueue with one job per transaction (jobs/s), and a drain of --jobs no-op
jobs with their own workers at 1 and 2 processes (jobs/s, wall time of the worker commands). For
pgqueuer also its batch enqueue of 10,000 and the pickup latency of an idle consumer (p50/p99
ms; ``--pickup-samples`` jobs 10 ms apart after a warm-up job, 0 to skip). Prints one JSON
object; bench/run_all.py reads it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import pgq  # noqa: E402
from _common import recreate_database  # noqa: E402

URL = os.environ.get("PEERS_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/jobqueue_peers")
ENV = {
    **os.environ,
    "PEERS_DATABASE_URL": URL,
    "DJANGO_SETTINGS_MODULE": "settings",
    "PYTHONPATH": str(HERE),
}
os.environ.update(ENV)


def sql(statement: str) -> list[tuple]:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute(statement)
        return cur.fetchall() if cur.description else []


def workers(cmd: list[str], processes: int) -> float:
    start = time.perf_counter()
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "django", *cmd],
            env=ENV,
            cwd=HERE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(processes)
    ]
    for proc in procs:
        proc.wait()
    return time.perf_counter() - start


# -- django-tasks-db ---------------------------------------------------------------------------


def dtdb_reset() -> None:
    sql("TRUNCATE django_tasks_database_dbtaskresult")


def dtdb_enqueue(n: int) -> float:
    from peerapp.tasks import noop

    dtdb_reset()
    start = time.perf_counter()
    for i in range(n):
        noop.enqueue(i=i)
    return n / (time.perf_counter() - start)


def dtdb_drain(n: int, processes: int) -> float:
    from django.db import transaction
    from peerapp.tasks import noop

    dtdb_reset()
    with transaction.atomic():  # setup, not measured: one transaction
        for i in range(n):
            noop.enqueue(i=i)
    sql("ANALYZE django_tasks_database_dbtaskresult")
    cmd = [
        "db_worker",
        "--queue-name",
        "bench",
        "--batch",
        "--no-startup-delay",
        "--interval",
        "0.1",
        "--no-reload",
    ]
    wall = workers(cmd, processes)
    [(done,)] = sql(
        "SELECT count(*) FROM django_tasks_database_dbtaskresult WHERE status = 'SUCCESSFUL'"
    )
    if done != n:
        raise SystemExit(f"django-tasks-db drain: {done} of {n} succeeded")
    return n / wall


# -- Procrastinate -----------------------------------------------------------------------------


def pc_reset() -> None:
    sql("TRUNCATE procrastinate_jobs CASCADE")


def pc_enqueue(n: int) -> float:
    from peerapp.tasks import procrastinate_noop

    pc_reset()
    start = time.perf_counter()
    for i in range(n):
        procrastinate_noop.defer(i=i)
    return n / (time.perf_counter() - start)


def pc_drain(n: int, processes: int) -> float:
    from peerapp.tasks import procrastinate_noop

    pc_reset()
    for start in range(0, n, 1000):  # setup, not measured
        procrastinate_noop.batch_defer(*({"i": i} for i in range(start, min(n, start + 1000))))
    sql("ANALYZE procrastinate_jobs")
    cmd = ["procrastinate", "worker", "--queues", "bench", "--concurrency", "10", "--one-shot"]
    wall = workers(cmd, processes)
    [(done,)] = sql("SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'")
    if done != n:
        raise SystemExit(f"procrastinate drain: {done} of {n} succeeded")
    return n / wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--enqueue-jobs", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--pickup-samples", type=int, default=500)
    args = parser.parse_args()
    recreate_database(URL, ENV, cwd=HERE)
    pgq.install()
    import django

    django.setup()
    import django_tasks_db
    import procrastinate

    def median(fn, *a):
        values = [fn(*a) for _ in range(args.runs)]
        if isinstance(values[0], tuple):
            return [[statistics.median(c), min(c), max(c)] for c in zip(*values, strict=True)]
        return [statistics.median(values), min(values), max(values)]

    result = {
        "versions": {
            "django-tasks-db": getattr(django_tasks_db, "__version__", _version("django-tasks-db")),
            "procrastinate": getattr(procrastinate, "__version__", _version("procrastinate")),
            "pgqueuer": _version("pgqueuer"),
        },
        "django-tasks-db": {
            "enqueue": median(dtdb_enqueue, args.enqueue_jobs),
            "drain1": median(dtdb_drain, args.jobs, 1),
            "drain2": median(dtdb_drain, args.jobs, 2),
        },
        "procrastinate": {
            "enqueue": median(pc_enqueue, args.enqueue_jobs),
            "drain1": median(pc_drain, args.jobs, 1),
            "drain2": median(pc_drain, args.jobs, 2),
        },
        "pgqueuer": {
            "enqueue": median(pgq.enqueue, args.enqueue_jobs),
            "enqueue_many": median(pgq.enqueue_many, 10_000),
            "drain1": median(pgq.drain, args.jobs, 1),
            "drain2": median(pgq.drain, args.jobs, 2),
        },
    }
    if args.pickup_samples:
        result["pgqueuer"]["pickup"] = median(pgq.pickup, args.pickup_samples, 0.01)
    print(json.dumps(result))


def _version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


if __name__ == "__main__":
    main()
