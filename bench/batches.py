"""What a batch costs: enqueueing 10,000 members, and the bookkeeping per member ack.

Same database, same run, interleaved rounds of the same N no-op jobs enqueued two ways: plain
(``enqueue_many``) and as one batch (``jobqueue.batch`` + ``b.enqueue_many``, with an
on_complete callback). Each round then drains the jobs with ``claim`` of 100 and ``finish_many``
of 100 acks (only the store's statements; no handler, no worker), first in this one process,
then with ``--threads`` connections at once on the same batch (the hot batch row: every
statement of every thread updates it). Reported: enqueue seconds for the N jobs, and
microseconds per job of ``finish_many`` (one connection) and of the whole drain (threads).
A batch round also checks that its callback was enqueued exactly once.

    .venv/bin/python bench/batches.py              # 10,000 jobs, 3 rounds per side, 4 threads
    BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/mybench .venv/bin/python bench/batches.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time

from _common import bench_env, recreate_database

URL = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/jobqueue_bench")
ENV = bench_env(URL)
REPORT = "tests.testapp.jobs.batch_report"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3, help="rounds per side")
    parser.add_argument("--threads", type=int, default=4)
    args = parser.parse_args()
    recreate_database(URL, ENV)

    import django

    django.setup()
    from django.db import connection, connections

    import jobqueue
    from jobqueue.models import Job
    from jobqueue.store import get_store
    from jobqueue.store.finishing import ack_outcome

    store = get_store()
    specs = [
        {"queue": "bench", "job_type": "tests.testapp.jobs.noop", "payload": {"i": i}}
        for i in range(args.jobs)
    ]

    def enqueue(batched: bool) -> tuple[float, int | None]:
        t0 = time.perf_counter()
        if batched:
            with jobqueue.batch(on_complete=REPORT) as b:
                b.enqueue_many(specs)
            batch_id: int | None = b.id
        else:
            jobqueue.enqueue_many(specs)
            batch_id = None
        return time.perf_counter() - t0, batch_id

    def reset() -> None:
        with connection.cursor() as cursor:
            cursor.execute("TRUNCATE jobqueue_job, jobqueue_batch")

    def analyze() -> None:
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE jobqueue_job")
            cursor.execute("VACUUM ANALYZE jobqueue_batch")

    def drain_one() -> float:
        finish_s = 0.0
        while jobs := store.claim(["bench"], "bench", 100, 60.0):
            t0 = time.perf_counter()
            store.finish_many([ack_outcome(j.id, j.lease_token, "null") for j in jobs])
            finish_s += time.perf_counter() - t0
        return finish_s / args.jobs * 1e6

    def drain_threads() -> tuple[float, list[BaseException]]:
        errors: list[BaseException] = []

        def run() -> None:
            try:
                mine = get_store()
                while jobs := mine.claim(["bench"], "bench", 100, 60.0):
                    mine.finish_many([ack_outcome(j.id, j.lease_token, "null") for j in jobs])
            except BaseException as exc:  # noqa: BLE001 - counted and reported
                errors.append(exc)
            finally:
                connections.close_all()

        threads = [threading.Thread(target=run) for _ in range(args.threads)]
        t0 = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return (time.perf_counter() - t0) / args.jobs * 1e6, errors

    def callbacks(batch_id: int | None) -> int:
        if batch_id is None:
            return 0
        return Job.objects.filter(type=REPORT, payload__batch__id=batch_id).count()

    rows: dict[bool, list[tuple[float, float, float]]] = {True: [], False: []}
    for r in range(args.rounds):
        for batched in (True, False) if r % 2 == 0 else (False, True):
            reset()
            enqueue_s, batch_id = enqueue(batched)
            analyze()
            finish_us = drain_one()
            assert callbacks(batch_id) == int(batched), "callback not enqueued exactly once"
            reset()
            _, batch_id = enqueue(batched)
            analyze()
            drain_us, errors = drain_threads()
            assert not errors, errors[:3]
            assert callbacks(batch_id) == int(batched), "callback not enqueued exactly once"
            rows[batched].append((enqueue_s, finish_us, drain_us))

    print(
        f"{args.jobs:,} jobs, {args.rounds} rounds per side, median (min-max); "
        f"drain with {args.threads} threads"
    )
    for batched in (False, True):
        cols = list(zip(*rows[batched], strict=True))
        text = [
            f"{statistics.median(c):.{p}f} ({min(c):.{p}f}-{max(c):.{p}f})"
            for c, p in zip(cols, (2, 1, 1), strict=True)
        ]
        print(
            f"{'batch' if batched else 'plain'}: enqueue {text[0]} s, "
            f"finish_many {text[1]} us/job, drain {text[2]} us/job"
        )


if __name__ == "__main__":
    main()
