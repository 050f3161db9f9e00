"""What the finished-notify trigger (migration 0013_progress) costs the finish path.

Same database, interleaved rounds with the trigger on and dropped: each round enqueues N no-op
jobs (``enqueue_many``), VACUUM ANALYZEs, then drains them in this one process by ``claim`` of
100 and ``finish_many`` of 100 acks (no handler, no worker: only the store's two statements),
and reports microseconds per job of each. Nobody waits on these jobs, as in a drain: the
trigger's ``WHEN`` is false for every row.

    .venv/bin/python bench/finish_notify.py              # 10,000 jobs, 6 rounds per side
    .venv/bin/python bench/finish_notify.py --jobs 5000 --rounds 12
"""

from __future__ import annotations

import argparse
import importlib
import os

from _common import bench_env, recreate_database

URL = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/jobqueue_bench")
ENV = bench_env(URL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=6, help="rounds per side")
    args = parser.parse_args()
    recreate_database(URL, ENV)

    import django

    django.setup()
    from _finish_path import drain, interleaved, set_trigger, spread
    from django.db import connection

    from jobqueue.store import NewJob, get_store

    migration = importlib.import_module("jobqueue.migrations.0013_progress")
    store = get_store()

    def one_round() -> tuple[float, float]:
        with connection.cursor() as cursor:
            cursor.execute("TRUNCATE jobqueue_job")
        new = NewJob(queue="bench", type="tests.testapp.jobs.noop", payload_json="{}")
        store.enqueue_many([new] * args.jobs)
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE jobqueue_job")
        claim_s, finish_s, _ = drain(store, "bench")
        return finish_s / args.jobs * 1e6, claim_s / args.jobs * 1e6

    results: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
    for on in interleaved((True, False), args.rounds):
        set_trigger(connection, migration.UNNOTIFY_SQL, migration.NOTIFY_SQL, on)
        results[on].append(one_round())
    set_trigger(connection, migration.UNNOTIFY_SQL, migration.NOTIFY_SQL, True)
    print(f"{args.jobs:,} jobs, {args.rounds} rounds per side, median (min-max), us per job")
    for on in (False, True):
        finish = [f for f, _ in results[on]]
        claim = [c for _, c in results[on]]
        print(
            f"trigger {'on ' if on else 'off'}: finish_many {spread(finish)}, claim {spread(claim)}"
        )


if __name__ == "__main__":
    main()
