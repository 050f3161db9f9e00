"""Chaos: two supervisors drain a steady producer while a fault strikes every 1-3 s (issue 32).

    .venv/bin/python bench/chaos.py                    # the issue's: 60 s clean, 600 s faults
    .venv/bin/python bench/chaos.py --clean-s 30 --faults-s 90   # a size CI affords
    .venv/bin/python bench/chaos.py --private          # on a throwaway cluster of its own

Two ``runworkers --processes 2 --concurrency 6`` supervisors serve one queue fed by a producer
(this script: ``--rate`` jobs/s, inserted every 0.1 s, each working ``--job-s`` seconds: one
child's 6 slots cannot keep up alone, so lost children show as lost throughput). After
``--clean-s`` seconds of clean running, for ``--faults-s`` seconds a fault every 1-3 s: SIGKILL
of a worker child, SIGSTOP of one for 2-3 leases (then SIGCONT), or every connection to the
database cut. Then the faults stop, the producer stops, and the workers drain what is left.

Prints the throughput (jobs succeeded per second) of the clean phase and of the fault phase and
their ratio (issue 32 asks >= 50%), the live children per supervisor sampled every 10 s, the jobs
still waiting when the faults stopped, and at the end the lost (dead or cancelled) and stuck
(leased past their lease, not reaped) jobs, both of which must be 0, and the jobs not drained
when ``--drain-s`` ran out (a loaded machine, or a producer past the fleet's capacity: they
still wait; before, they counted as lost). Uses its own database (CHAOS_DATABASE_URL, default
.../jobqueue_chaos), recreated. ``BENCH_JOBQUEUE_ROOT`` measures another checkout (the
"before" side).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import time

import psycopg
from _common import ROOT, bench_env, recreate_database

sys.path.insert(0, str(ROOT))

from tests.pgcluster import PrivateCluster

URL = os.environ.get("CHAOS_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/jobqueue_chaos")
#: Lease of the workers, seconds: a SIGSTOPped child is frozen for 2-3 of them.
LEASE_S = 2.0

INSERT = (
    "INSERT INTO jobqueue_job (queue, type, payload, priority, tenant_id, state, run_at,"
    " attempts, max_attempts, timeout_s, leased_by, errors, dead_reason, created_at)"
    " SELECT 'chaos', 'tests.testapp.jobs.recorded_work', jsonb_build_object('sleep_s', %s),"
    " 0, '', 'ready', now(), 0, 25, 30, '', '[]', '', now() FROM generate_series(1, %s)"
)


def children(pid: int) -> list[int]:
    """Return the worker children of supervisor ``pid`` (not its short hand-back helpers)."""
    try:
        out = subprocess.run(
            ["pgrep", "-P", str(pid)], capture_output=True, text=True, check=False
        ).stdout
    except OSError:
        return []
    return [int(p) for p in out.split()]


def count(conn: psycopg.Connection, where: str) -> int:
    row = conn.execute(f"SELECT count(*) FROM jobqueue_job WHERE {where}").fetchone()
    return int(row[0]) if row else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clean-s", type=float, default=60.0)
    parser.add_argument("--faults-s", type=float, default=600.0)
    parser.add_argument("--rate", type=int, default=50, help="jobs enqueued per second")
    parser.add_argument("--job-s", type=float, default=0.2, help="each job's work, seconds")
    parser.add_argument("--drain-s", type=float, default=600.0, help="longest wait to drain")
    parser.add_argument("--seed", type=int, default=32)
    parser.add_argument(
        "--private",
        action="store_true",
        help="run on a private cluster of its own (tests/pgcluster.py), not CHAOS_DATABASE_URL:"
        " the faults cut every connection to the database",
    )
    args = parser.parse_args()
    if not args.private:
        run(args, URL)
        return
    cluster = PrivateCluster()
    cluster.start()
    try:
        run(args, cluster.url("jobqueue_chaos"))
    finally:
        cluster.destroy()


def run(args: argparse.Namespace, url: str) -> None:
    """Run the scenario of ``args`` on database ``url`` (recreated); exit 1 if it fails."""
    rng = random.Random(args.seed)
    env = bench_env(url)
    env["JOBQUEUE_SETTINGS"] = json.dumps({"LEASE_SECONDS": LEASE_S})
    recreate_database(url, env)
    cmd = [sys.executable, "-m", "django", "runworkers", "--queues", "chaos"]
    cmd += ["--processes", "2", "--concurrency", "6"]
    sups = [subprocess.Popen(cmd, env=env, cwd=ROOT, start_new_session=True) for _ in range(2)]
    conn = psycopg.connect(url, autocommit=True)
    stopped: dict[int, float] = {}  # SIGSTOPped child -> when to SIGCONT it
    samples: list[tuple[float, list[int]]] = []
    counts: dict[str, int] = {}
    try:
        while sum(len(children(s.pid)) for s in sups) < 4:
            time.sleep(0.2)
        start = time.monotonic()
        faults_at = start + args.clean_s
        end_at = faults_at + args.faults_s
        next_fault = faults_at
        next_batch = start
        next_sample = start
        marks: dict[str, int] = {"start": count(conn, "state = 'succeeded'")}
        per_batch = max(args.rate // 10, 1)
        while (now := time.monotonic()) < end_at:
            if now >= next_batch:
                conn.execute(INSERT, [args.job_s, per_batch])
                next_batch += 0.1
            if "faults" not in marks and now >= faults_at:
                marks["faults"] = count(conn, "state = 'succeeded'")
            for pid, until in list(stopped.items()):
                if now >= until:
                    try:
                        os.kill(pid, signal.SIGCONT)
                    except ProcessLookupError:
                        pass
                    del stopped[pid]
            if now >= faults_at and now >= next_fault:
                kind = rng.choice(["kill", "stop", "cut"])
                live = [c for s in sups for c in children(s.pid) if c not in stopped]
                if kind == "cut":
                    conn.execute(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
                        "datname = current_database() AND pid <> pg_backend_pid()"
                    )
                elif live:
                    victim = rng.choice(live)
                    try:
                        if kind == "kill":
                            os.kill(victim, signal.SIGKILL)
                        else:
                            os.kill(victim, signal.SIGSTOP)
                            stopped[victim] = now + rng.uniform(2, 3) * LEASE_S
                    except ProcessLookupError:
                        pass
                counts[kind] = counts.get(kind, 0) + 1
                next_fault = now + rng.uniform(1, 3)
            if now >= next_sample:
                samples.append((now - start, [len(children(s.pid)) for s in sups]))
                next_sample += 10
            time.sleep(0.02)
        for pid in stopped:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        marks["end"] = count(conn, "state = 'succeeded'")
        waiting = count(conn, "state IN ('ready', 'scheduled')")
        total = count(conn, "true")
        drain_until = time.monotonic() + args.drain_s
        while count(conn, "state = 'succeeded'") < total and time.monotonic() < drain_until:
            time.sleep(1)
        drained_s = args.drain_s - max(drain_until - time.monotonic(), 0.0)
        lost = count(conn, "state IN ('dead', 'cancelled')")
        stuck = count(conn, "state = 'leased' AND lease_until < now()")
        undrained = count(conn, "state IN ('ready', 'scheduled', 'leased')")
    finally:
        for sup in sups:
            try:
                os.killpg(sup.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for sup in sups:
            try:
                sup.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(sup.pid, signal.SIGKILL)
        conn.close()
    clean = (marks["faults"] - marks["start"]) / args.clean_s
    faulty = (marks["end"] - marks["faults"]) / args.faults_s
    print(f"\nchaos: {args.rate} jobs/s of {args.job_s} s each, 2 supervisors x 2 x 6")
    print(f"faults                  {counts} over {args.faults_s:.0f} s")
    print(f"clean throughput        {clean:.1f} jobs/s ({args.clean_s:.0f} s)")
    print(f"throughput under faults {faulty:.1f} jobs/s ({faulty / clean:.0%} of clean)")
    print(f"waiting when faults end {waiting}")
    print(f"drained after           {drained_s:.0f} s; total {total} jobs")
    print(f"lost / stuck            {lost} / {stuck}")
    if undrained:
        print(f"not drained             {undrained} (still waiting after --drain-s)")
    print("live children per supervisor, every 10 s:")
    print("  " + " ".join(f"{t:.0f}s:{a}+{b}" for t, (a, b) in samples))
    if faulty < clean / 2 or lost or stuck or undrained:
        sys.exit(1)


if __name__ == "__main__":
    main()
