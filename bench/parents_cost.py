"""What jobs that run after other jobs (migration 0015_parents) cost the finish path.

Same database, interleaved rounds of three kinds, each draining N jobs in this one process by
``claim`` of 100 and ``finish_many`` of 100 acks (no handler, no worker: only the store's
statements), reporting microseconds per acked job:

* ``plain, trigger off``: no-op jobs, the settle trigger dropped (the cost before 0015);
* ``plain, trigger on``: the same jobs with it (no job has children: its ``WHEN`` is false);
* ``parents``: every acked job has one waiting child, which its ack releases (trigger on).

    .venv/bin/python bench/parents_cost.py              # 5,000 jobs, 5 rounds per kind
    .venv/bin/python bench/parents_cost.py --jobs 2000 --rounds 3
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
    parser.add_argument("--jobs", type=int, default=5_000)
    parser.add_argument("--rounds", type=int, default=5, help="rounds per kind")
    args = parser.parse_args()
    recreate_database(URL, ENV)

    import django

    django.setup()
    from _finish_path import drain, interleaved, set_trigger, spread
    from django.db import connection

    from jobqueue.store import NewJob, get_store

    migration = importlib.import_module("jobqueue.migrations.0015_parents")
    store = get_store()
    new = NewJob(queue="bench", type="tests.testapp.jobs.noop", payload_json="{}")
    kid = NewJob(queue="kids", type="tests.testapp.jobs.noop", payload_json="{}")

    def one_round(kind: str) -> float:
        on = kind != "plain, trigger off"
        set_trigger(connection, migration.UNSETTLE_SQL, migration.SETTLE_SQL, on)
        with connection.cursor() as cursor:
            cursor.execute("TRUNCATE jobqueue_job, jobqueue_jobparent")
        ids = [job_id for job_id, _ in store.enqueue_many([new] * args.jobs)]
        if kind == "parents":
            for parent in ids:
                store.enqueue_after(kid, [parent])
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE jobqueue_job")
            cursor.execute("VACUUM ANALYZE jobqueue_jobparent")
        _, finish_s, _ = drain(store, "bench")
        if kind == "parents":
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT count(*) FROM jobqueue_job WHERE queue = 'kids' AND state = 'ready'"
                )
                assert cursor.fetchone()[0] == args.jobs, "a child was not released"
        return finish_s / args.jobs * 1e6

    kinds = ("plain, trigger off", "plain, trigger on", "parents")
    results: dict[str, list[float]] = {kind: [] for kind in kinds}
    for kind in interleaved(kinds, args.rounds):
        results[kind].append(one_round(kind))
    set_trigger(connection, migration.UNSETTLE_SQL, migration.SETTLE_SQL, True)
    print(f"{args.jobs:,} jobs, {args.rounds} rounds per kind, median (min-max), us per acked job")
    for kind in kinds:
        print(f"{kind:<20} finish_many {spread(results[kind])}")


if __name__ == "__main__":
    main()
