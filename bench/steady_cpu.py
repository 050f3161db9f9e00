"""CPU per no-op job of a long-running worker (its start and exit left out), and its start.

    .venv/bin/python bench/steady_cpu.py [--jobs 30000] [--warm 3000] [--count 15000]
        [--concurrency 25] [--pyspy worker.raw] [--start-runs 3]

Recreates PROFILE_DATABASE_URL (default .../jobqueue_profile), inserts ``--jobs`` ready no-op
jobs, starts one ``runworkers --no-scheduler --queues bench`` (not ``--burst``: it stays up),
waits until ``--warm`` jobs succeeded, then reads the process's CPU (user + system, every
thread, ``/proc/PID/stat``) and the succeeded count, waits for ``--count`` more, and reads both
again: CPU per job in µs over a counted number of jobs, with no start or exit in it. With
``--pyspy FILE`` a ``py-spy record --gil --threads -r 500 -f raw`` runs on the process over that
same window (``--pyspy-flags ""``: every sample, not only the GIL holder's). No signal
receivers are connected (``JOBQUEUE_BENCH_NO_RECEIVERS=1``).

Then ``--start-runs`` times: one ``runworkers --burst`` on the empty queue, its CPU (children's
rusage) and wall from spawn to exit: what a worker's start and exit cost.
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import statistics
import subprocess
import sys
import time

from _common import ROOT, bench_env, recreate_database

URL = os.environ.get("PROFILE_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/jobqueue_profile")
ENV = bench_env(URL)
ENV["JOBQUEUE_BENCH_NO_RECEIVERS"] = "1"
os.environ["BENCH_DATABASE_URL"] = URL
CMD = [sys.executable, "-m", "django", "runworkers", "--no-scheduler", "--queues", "bench"]
TICK = os.sysconf("SC_CLK_TCK")


def proc_cpu_s(pid: int) -> tuple[float, float, int]:
    """Return user and system CPU seconds of process ``pid`` (all its threads), and the
    context switches of its threads alive now (voluntary + not)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    switches = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/status") as f:
                for line in f:
                    # voluntary_ctxt_switches and nonvoluntary_ctxt_switches
                    if "ctxt_switches:" in line:
                        switches += int(line.split()[-1])
        except FileNotFoundError:
            pass
    # Fields 14 and 15 (utime, stime) are the 12th and 13th after the ")" ending the name.
    return int(fields[11]) / TICK, int(fields[12]) / TICK, switches


def succeeded() -> int:
    import core

    [(done,)] = core.sql("SELECT count(*) FROM jobqueue_job WHERE state = 'succeeded'")
    return done


def wait_for(n: int) -> int:
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        done = succeeded()
        if done >= n:
            return done
        time.sleep(0.02)
    raise SystemExit(f"only {done} of {n} jobs succeeded")


def steady(args: argparse.Namespace) -> None:
    import core

    core.truncate()
    core.bulk_ready(args.jobs)
    proc = subprocess.Popen([*CMD, "--concurrency", str(args.concurrency)], env=ENV, cwd=ROOT)
    try:
        wait_for(args.warm)
        spy = None
        if args.pyspy:
            flags = [*args.pyspy_flags.split(), "--threads", "-r", "500", "-f", "raw"]
            target = ["-o", args.pyspy, "--pid", str(proc.pid)]
            spy = subprocess.Popen(
                ["py-spy", "record", "--nonblocking", *flags, *target],
                stdout=subprocess.DEVNULL,
            )
            time.sleep(0.5)
        cpu0, done0, t0 = proc_cpu_s(proc.pid), succeeded(), time.perf_counter()
        done1 = wait_for(done0 + args.count)
        cpu1, t1 = proc_cpu_s(proc.pid), time.perf_counter()
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait()
    finally:
        proc.terminate()
        proc.wait()
    jobs = done1 - done0
    user, system, switches = ((b - a) / jobs for a, b in zip(cpu0, cpu1, strict=True))
    print(
        f"steady: {jobs} jobs in {t1 - t0:.2f} s ({jobs / (t1 - t0):,.0f} jobs/s), "
        f"{(user + system) * 1e6:.0f} µs CPU/job (user {user * 1e6:.0f}, system "
        f"{system * 1e6:.0f}), {switches:.1f} context switches/job; "
        f"load {os.getloadavg()[0]:.1f}",
        flush=True,
    )


def start_exit(runs: int) -> None:
    import core

    core.truncate()
    cpus, walls = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run([*CMD, "--burst"], env=ENV, cwd=ROOT, check=True)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    print(
        f"start+exit: CPU {statistics.median(cpus):.2f} s ({min(cpus):.2f}-{max(cpus):.2f}), "
        f"wall {statistics.median(walls):.2f} s ({min(walls):.2f}-{max(walls):.2f}); "
        f"load {os.getloadavg()[0]:.1f}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=30_000)
    parser.add_argument("--warm", type=int, default=3_000)
    parser.add_argument("--count", type=int, default=15_000)
    parser.add_argument("--concurrency", type=int, default=25)
    parser.add_argument("--pyspy", default="", help="py-spy raw output file")
    parser.add_argument("--pyspy-flags", default="--gil", help='e.g. "" for on-CPU samples')
    parser.add_argument("--start-runs", type=int, default=3)
    parser.add_argument("--no-setup", action="store_true", help="the database exists already")
    args = parser.parse_args()
    if not args.no_setup:
        recreate_database(URL, ENV)
    import django

    django.setup()
    if args.count:
        steady(args)
    if args.start_runs:
        start_exit(args.start_runs)


if __name__ == "__main__":
    main()
