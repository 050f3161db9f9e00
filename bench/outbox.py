"""The outbox relay's lag: from the caller's commit to the job row on the queue database.

Two databases on one server (so one clock): ``default`` holds the caller's transactions and its
outbox, ``outbox_queue`` the queue. One real ``runworkers --database outbox_queue`` process
relays (and runs the no-op jobs). This process enqueues N jobs, each in its own ``atomic()``
block on default, paced at ``--rate`` per second; a job's lag is its row's ``created_at`` on the
queue database (the relay's insert) minus its outbox row's ``created_at`` (the enqueue, just
before the commit). Then one burst: N jobs in one transaction, and the seconds until all are
relayed. Rounds per relay interval, each with the relay woken by NOTIFY (``notify``: the
outbox write notifies at commit, the relay LISTENs on default) and polling only (``poll``: the
worker runs with ``LISTEN_NOTIFY`` off, as before the relay listened).

    .venv/bin/python bench/outbox.py                       # 1,000 jobs at 100/s, 0.2 s and 0.05 s
    .venv/bin/python bench/outbox.py --jobs 500 --rate 50 --intervals 0.2 --modes poll,notify
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time

from _common import ROOT, bench_env, recreate_database

URL = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/jobqueue_bench")
QUEUE_URL = os.environ.get(
    "BENCH_QUEUE_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/jobqueue_bench_queue"
)
os.environ["JOBQUEUE_OUTBOX_QUEUE_URL"] = QUEUE_URL
ENV = bench_env(URL)
NOOP = "tests.testapp.jobs.noop"


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def start_worker(interval_s: float, listen: bool) -> subprocess.Popen:
    settings = {"OUTBOX_RELAY_INTERVAL_SECONDS": interval_s, "LISTEN_NOTIFY": listen}
    env = {**ENV, "JOBQUEUE_SETTINGS": json.dumps(settings)}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "django",
            "runworkers",
            "--database",
            "outbox_queue",
            "--queues",
            "bench",
            "--concurrency",
            "4",
        ],
        cwd=ROOT,
        env=env,
        start_new_session=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=100.0, help="paced enqueues per second")
    parser.add_argument("--intervals", default="0.2,0.05", help="relay intervals, seconds")
    parser.add_argument("--modes", default="poll,notify", help="poll and/or notify")
    args = parser.parse_args()
    recreate_database(URL, ENV)
    recreate_database(QUEUE_URL, {**ENV, "DATABASE_URL": QUEUE_URL})

    import django

    django.setup()
    from django.db import transaction

    from jobqueue.client import enqueue_or_get
    from jobqueue.models import Job

    def wait_relayed(ids: list[int]) -> float:
        started = time.monotonic()
        while Job.objects.using("outbox_queue").filter(id__in=ids).count() < len(ids):
            time.sleep(0.05)
        return time.monotonic() - started

    print(f"{args.jobs} jobs at {args.rate:g}/s, each in its own transaction on default")
    rounds = [
        (float(interval), mode)
        for interval in args.intervals.split(",")
        for mode in args.modes.split(",")
    ]
    for interval, mode in rounds:
        worker = start_worker(interval, listen=mode == "notify")
        try:
            # Warm-up: the clock runs once the relay has relayed one job.
            with transaction.atomic():
                warm = enqueue_or_get("bench", NOOP, {}, using="outbox_queue")[0]
            wait_relayed([warm])
            put_at: dict[int, object] = {}
            started = time.monotonic()
            for i in range(args.jobs):
                with transaction.atomic():
                    job_id, _, created_at = enqueue_or_get(
                        "bench", NOOP, {"i": i}, using="outbox_queue"
                    )
                put_at[job_id] = created_at
                pause = started + (i + 1) / args.rate - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
            wait_relayed(list(put_at))
            rows = Job.objects.using("outbox_queue").filter(id__in=list(put_at))
            lags = [
                (created - put_at[job_id]).total_seconds() * 1000  # type: ignore[operator]
                for job_id, created in rows.values_list("id", "created_at")
            ]
            with transaction.atomic():
                burst = [
                    enqueue_or_get("bench", NOOP, {"b": i}, using="outbox_queue")[0]
                    for i in range(args.jobs)
                ]
            burst_s = wait_relayed(burst)
            print(
                f"{mode}, relay interval {interval:g} s: lag p50 {statistics.median(lags):.0f} ms, "
                f"p99 {percentile(lags, 99):.0f} ms, max {max(lags):.0f} ms; "
                f"burst of {args.jobs} in one transaction relayed in {burst_s:.2f} s"
            )
        finally:
            os.killpg(worker.pid, signal.SIGTERM)
            worker.wait(timeout=60)
            Job.objects.using("outbox_queue").all().delete()


if __name__ == "__main__":
    main()
