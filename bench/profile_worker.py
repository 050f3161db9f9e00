"""Profile one worker's hot path (claim -> run -> ack) in-process with cProfile.

    .venv/bin/python bench/profile_worker.py [--jobs 10000] [--concurrency 10] [--top 30]

Recreates PROFILE_DATABASE_URL (default .../jobqueue_profile), inserts --jobs ready no-op jobs,
runs ``Worker(burst=True)`` in this process under cProfile (every thread's time is the main
thread's waits plus what the handler threads do; cProfile sees the main thread only, which is
where claims and acks happen), and prints the functions with the most own time.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import time

from _common import bench_env, recreate_database

URL = os.environ.get("PROFILE_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/jobqueue_profile")
ENV = bench_env(URL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    recreate_database(URL, ENV)
    import django

    django.setup()
    import core

    from jobqueue.worker import Worker

    core.bulk_ready(args.jobs)
    worker = Worker(
        queues=["bench"], concurrency=args.concurrency, burst=True, install_signal_handlers=False
    )
    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.enable()
    worker.run()
    profiler.disable()
    elapsed = time.perf_counter() - start
    print(f"{worker.stats['succeeded']} jobs in {elapsed:.2f} s: {args.jobs / elapsed:,.0f} jobs/s")
    pstats.Stats(profiler).sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
