"""What a worker's write path costs per job: synchronous or asynchronous commit, and the ack
with the next claim in two transactions (as shipped) or in one (a savepoint before the claim).

    .venv/bin/python bench/commit_path.py [--jobs 5000] [--rounds 3] [--batch 25]

Recreates the database named by BENCH_DATABASE_URL (default
postgres://postgres@127.0.0.1:5432/jobqueue_bench). Each round drains ``--jobs`` ready no-op jobs
in this one process the way a worker's loop does once it is busy: claim ``--batch``, then each
ack of the batch goes with the next claim in one round trip (``finish_then_claim``), no handler
run. Four ways, interleaved by round so a drift of the machine's load hits each:

* ``sync, 2 tx``: ``ASYNCHRONOUS_COMMIT`` False: the ack and the claim each commit and flush;
* ``async, 2 tx``: the worker's default: both commit with ``synchronous_commit = off``;
* ``sync, 1 tx`` and ``async, 1 tx``: the ack, a ``SAVEPOINT``, the claim and one ``COMMIT`` in
  one transaction and one round trip (a claim that fails would be rolled back to the savepoint
  and the acks committed, in a second round trip: not exercised here).

Prints jobs/s per way, median (min-max) of the rounds, and the server's ``fsync`` and
``synchronous_commit`` settings the figures depend on.

With ``--drain``, also real ``runworkers --burst`` processes (1 and 2, default concurrency) on
``--jobs`` ready no-op jobs, ``ASYNCHRONOUS_COMMIT`` True and False interleaved: jobs/s from
the first claim to the last ack (database clock).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from _common import bench_env, recreate_database

URL = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/jobqueue_bench")
ENV = bench_env(URL)
NOOP = "tests.testapp.jobs.noop"
QUEUE = "commit"


def sql(statement: str, params: list | None = None) -> list[tuple]:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute(statement, params)
        return cur.fetchall() if cur.description else []


def fill(n: int) -> None:
    sql("TRUNCATE jobqueue_job RESTART IDENTITY")
    sql(
        "INSERT INTO jobqueue_job (queue, type, payload, priority, tenant_id, state, run_at,"
        " attempts, max_attempts, timeout_s, leased_by, errors, dead_reason, created_at)"
        " SELECT %s, %s, '{}', 0, '', 'ready', now(), 0, 8, 30, '', '[]', '', now()"
        " FROM generate_series(1, %s)",
        [QUEUE, NOOP, n],
    )
    sql("VACUUM ANALYZE jobqueue_job")


def one_transaction(store: Any, outcomes: list, request: Any) -> list:
    """The ack, a savepoint and the claim in one transaction, one round trip; return the jobs."""
    from django.db import connection

    from jobqueue.store import bounded
    from jobqueue.store.plan import ClaimPlan
    from jobqueue.store.postgres.finishing import finish_statement
    from jobqueue.store.rows import fetchall
    from jobqueue.store.sqltext import sql as text_of

    jobs = store.jobs
    plan = request.plan or ClaimPlan.even(len(request.queues))
    name, claim_params = jobs._claim_statement(
        list(request.queues), request.worker_id, request.max_jobs, request.lease_s, None, plan
    )
    finish_params = store.finishing.finish_params(outcomes, None)
    finish = text_of(finish_statement(store.alias, finish_params["ids"]))
    connection.ensure_connection()
    raw = connection.connection
    with raw.pipeline():
        raw.cursor().execute("BEGIN")
        raw.cursor().execute(bounded._limit_sql(), bounded._limits(None))
        raw.cursor().execute(finish, finish_params)
        raw.cursor().execute("SAVEPOINT claim")
        claim = raw.cursor()
        claim.execute(text_of(name), claim_params)
        raw.cursor().execute("RELEASE SAVEPOINT claim")
        raw.cursor().execute("COMMIT")
    return jobs._claimed(fetchall(claim), plan, False)


def drain(store: Any, batch: int, cycle: Callable[[Any, list, Any], list]) -> tuple[int, float]:
    from jobqueue.store.finishing import ack_outcome
    from jobqueue.store.interface import ClaimRequest

    request = ClaimRequest([QUEUE], "bench", batch, 60.0)
    began = time.perf_counter()
    jobs = store.claim([QUEUE], "bench", batch, 60.0)
    done = 0
    while jobs:
        outcomes = [ack_outcome(j.id, j.lease_token, "null") for j in jobs]
        done += len(jobs)
        jobs = cycle(store, outcomes, request)
    return done, time.perf_counter() - began


def drain_processes(n: int, processes: int, asynchronous: bool) -> float:
    """Return jobs/s (first start to last finish) of ``processes`` ``runworkers --burst``."""
    import json
    import subprocess
    import sys

    from _common import ROOT

    fill(n)
    settings = {"ENQUEUE_UNREGISTERED": True, "ASYNCHRONOUS_COMMIT": asynchronous}
    env = {**ENV, "JOBQUEUE_SETTINGS": json.dumps(settings)}
    cmd = [sys.executable, "-m", "django", "runworkers", "--no-scheduler", "--queues", QUEUE]
    procs = [subprocess.Popen([*cmd, "--burst"], env=env, cwd=ROOT) for _ in range(processes)]
    for proc in procs:
        proc.wait()
    [(done, span)] = sql(
        "SELECT count(*) FILTER (WHERE state = 'succeeded'),"
        " extract(epoch FROM max(finished_at) - min(started_at)) FROM jobqueue_job"
    )
    assert done == n, (done, n)
    return n / float(span)


def two_transactions(store: Any, outcomes: list, request: Any) -> list:
    made = store.finish_then_claim(outcomes, request)
    assert made.error is None
    return made.claimed or []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, default=25)
    parser.add_argument("--drain", action="store_true", help="also real worker processes")
    args = parser.parse_args()
    recreate_database(URL, ENV)
    import django

    django.setup()
    from django.test import override_settings

    from jobqueue.store import bounded, get_store

    store = get_store("default")
    ways = {
        "sync, 2 tx": (False, two_transactions),
        "async, 2 tx": (True, two_transactions),
        "sync, 1 tx": (False, one_transaction),
        "async, 1 tx": (True, one_transaction),
    }
    rates: dict[str, list[float]] = {name: [] for name in ways}
    for r in range(args.rounds):
        order = list(ways) if r % 2 == 0 else list(reversed(ways))
        for name in order:
            asynchronous, cycle = ways[name]
            fill(args.jobs)
            with override_settings(JOBQUEUE={"ASYNCHRONOUS_COMMIT": asynchronous}):
                with bounded.asynchronous_commit():
                    done, seconds = drain(store, args.batch, cycle)
            assert done == args.jobs, (name, done)
            rates[name].append(done / seconds)
    [(fsync,)] = sql("SHOW fsync")
    [(commit,)] = sql("SHOW synchronous_commit")
    print(
        f"server: fsync {fsync}, synchronous_commit {commit}; "
        f"{args.jobs} jobs, {args.batch} a batch"
    )
    for name, values in rates.items():
        print(
            f"{name:12s} {statistics.median(values):8.0f} jobs/s "
            f"({min(values):.0f}-{max(values):.0f})"
        )
    if not args.drain:
        return
    for processes in (1, 2):
        drained: dict[bool, list[float]] = {True: [], False: []}
        for r in range(args.rounds):
            for asynchronous in (True, False) if r % 2 == 0 else (False, True):
                drained[asynchronous].append(drain_processes(args.jobs, processes, asynchronous))
        for asynchronous, values in drained.items():
            print(
                f"drain, {processes} process(es), ASYNCHRONOUS_COMMIT {asynchronous}: "
                f"{statistics.median(values):.0f} jobs/s ({min(values):.0f}-{max(values):.0f})"
            )


if __name__ == "__main__":
    main()
