"""Profile one worker's hot path (claim -> run -> ack), or measure its CPU per job.

    .venv/bin/python bench/profile_worker.py [--jobs 10000] [--concurrency 10] [--top 30]
    .venv/bin/python bench/profile_worker.py --cpu [--jobs 20000] [--processes 1,2] [--runs 3]
    .venv/bin/python bench/profile_worker.py --cpu --no-receivers ...

Recreates PROFILE_DATABASE_URL (default .../jobqueue_profile) and inserts --jobs ready no-op jobs.

Without ``--cpu``: runs ``Worker(burst=True)`` in this process under cProfile (cProfile sees the
main thread only, which is where claims and acks happen) and prints the functions with the most
own time.

With ``--cpu``: drains them with real ``runworkers --burst`` processes (``--processes``, each
``--concurrency``), ``--runs`` times per process count, and prints, median (min-max): jobs/s
over the whole command (wall), jobs/s from first claim to last ack (span, database clock), the
worker processes' CPU time (user + system, ``RUSAGE_CHILDREN``) per job in µs, and that less
what a process costs to start and exit (a drain of an empty queue, measured first): what a
long-running worker pays per job. The test settings connect signal receivers (tests/testapp);
``--no-receivers`` runs the workers with ``JOBQUEUE_BENCH_NO_RECEIVERS=1``, so none is
connected, as in a project without receivers. To see where a running worker spends its time,
run py-spy on it: ``py-spy record --gil -o flame.svg --pid PID`` (see docs/performance.md).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import resource
import statistics
import subprocess
import sys
import time

from _common import ROOT, bench_env, recreate_database

URL = os.environ.get("PROFILE_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/jobqueue_profile")
ENV = bench_env(URL)
# core (imported later) points this process at BENCH_DATABASE_URL: make that ours too.
os.environ["BENCH_DATABASE_URL"] = URL


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def drain_cpu(jobs: int, processes: int, concurrency: int) -> tuple[float, float, float]:
    """Drain ``jobs`` no-op jobs with ``processes`` ``runworkers --burst``; return (jobs/s
    wall, jobs/s span, worker CPU µs per job)."""
    import core

    core.truncate()
    core.bulk_ready(jobs)
    flags = ("--queues", "bench", "--burst", "--concurrency", str(concurrency))
    cpu_before = _children_cpu_s()
    start = time.perf_counter()
    # Not core.runworkers: that points its processes at BENCH_DATABASE_URL.
    cmd = [sys.executable, "-m", "django", "runworkers", "--no-scheduler", *flags]
    procs = [subprocess.Popen(cmd, env=ENV, cwd=ROOT) for _ in range(processes)]
    for proc in procs:
        proc.wait()
    wall = time.perf_counter() - start
    cpu = _children_cpu_s() - cpu_before
    if not jobs:
        return 0.0, 0.0, cpu * 1e6
    [(done, span)] = core.sql(
        "SELECT count(*) FILTER (WHERE state = 'succeeded'),"
        " extract(epoch FROM max(finished_at) - min(started_at)) FROM jobqueue_job"
    )
    if done != jobs:
        raise SystemExit(f"drain: only {done} of {jobs} jobs succeeded")
    return jobs / wall, jobs / float(span), cpu / jobs * 1e6


def cpu_mode(args: argparse.Namespace) -> None:
    if args.no_receivers:
        os.environ["JOBQUEUE_BENCH_NO_RECEIVERS"] = "1"
        ENV["JOBQUEUE_BENCH_NO_RECEIVERS"] = "1"
    # A process's start and exit (imports, django.setup, checks) cost the same for 10 jobs or
    # 1,000,000: measured on an empty queue, and taken out of the per-job figure.
    fixed = statistics.median(drain_cpu(0, 1, args.concurrency)[2] for _ in range(args.runs))
    print(f"start + exit of one runworkers process: {fixed / 1e6:.2f} s CPU", flush=True)
    for processes in (int(p) for p in args.processes.split(",")):
        runs = [drain_cpu(args.jobs, processes, args.concurrency) for _ in range(args.runs)]
        runs = [(*r, r[2] - fixed * processes / args.jobs) for r in runs]
        load = os.getloadavg()[0]
        cells = []
        for label, values in zip(
            ("jobs/s wall", "jobs/s span", "µs CPU/job", "beyond start/exit"),
            zip(*runs, strict=True),
            strict=True,
        ):
            cells.append(
                f"{label} {statistics.median(values):,.0f} ({min(values):,.0f}-{max(values):,.0f})"
            )
        print(
            f"{args.jobs} jobs, {processes} process(es) x {args.concurrency}: "
            + ", ".join(cells)
            + f"; load average {load:.1f}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--cpu", action="store_true", help="measure runworkers' CPU per job")
    parser.add_argument("--processes", default="1,2", help="with --cpu: process counts")
    parser.add_argument("--runs", type=int, default=3, help="with --cpu: runs per figure")
    parser.add_argument(
        "--no-receivers", action="store_true", help="with --cpu: no signal receivers connected"
    )
    args = parser.parse_args()
    recreate_database(URL, ENV)
    import django

    django.setup()
    if args.cpu:
        cpu_mode(args)
        return
    import core

    from jobqueue.worker.loop import Worker

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
