"""Async jobs on one event loop against the same jobs on threads: one worker process, 2,000 jobs
that each await a 0.5 s answer from a local HTTP server this script starts.

    .venv/bin/python bench/async_http.py                       # async at 2000, sync at 25 and 200
    .venv/bin/python bench/async_http.py --jobs 2000 --delay-ms 500 --async 1000,2000 --sync 25,200
    .venv/bin/python bench/async_http.py --pgqueuer 10:2000,2000:2000   # and pgqueuer's workers

Each row: ``runworkers --burst`` on a queue of ``--jobs`` jobs, one process. ``wall``: process
start to exit (Django's start-up included); ``run``: first claim to last finish (database clock:
min ``started_at`` to max ``finished_at``); ``peak RSS``: the process's ``VmHWM``, read until it
exits. The async jobs are ``tests.testapp.async_jobs.fetch`` (``asyncio`` streams), the sync ones
``tests.testapp.async_jobs.fetch_sync`` (``urllib``). Goal (async): all done in 5 s or less, peak
RSS 150 MB or less. The figures are in docs/performance.md.

``--pgqueuer BATCH:MAX,...`` also runs pgqueuer's async workers on the same jobs (one ``pgq run
--mode drain`` process, ``--batch-size BATCH --max-concurrent-tasks MAX``, the same asyncio
client: ``bench/peers/pgq_http.py``), with the peers' Python (``--peers-python``, default
``bench/.venv-peers/bin/python``; see bench/README.md) on ``PEERS_DATABASE_URL``, recreated.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

from _common import ROOT, bench_env, recreate_database

URL = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/jobqueue_bench")
PEERS_URL = os.environ.get(
    "PEERS_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/jobqueue_peers"
)


def peak_rss_mb(pid: int) -> float | None:
    """Return ``pid``'s peak resident memory (VmHWM), MB, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None


def run_one(env, server_url: str, *, kind: str, slots: int, jobs: int, delay_ms: int) -> dict:
    import jobqueue
    from jobqueue.models import Job

    Job.objects.all().delete()
    handler = "fetch" if kind == "async" else "fetch_sync"
    url = f"{server_url}/delay/{delay_ms}"
    spec = {"queue": "bench", "job_type": f"tests.testapp.async_jobs.{handler}"}
    jobqueue.enqueue_many([{**spec, "payload": {"url": url}} for _ in range(jobs)])
    flag = "--async-concurrency" if kind == "async" else "--concurrency"
    cmd = [sys.executable, "-m", "django", "runworkers", "--burst", "--queues", "bench"]
    cmd += [flag, str(slots), "--no-scheduler", "-v", "0"]
    began = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, cwd=ROOT)
    peak = 0.0
    while proc.poll() is None:
        rss = peak_rss_mb(proc.pid)
        if rss is not None:
            peak = max(peak, rss)
        time.sleep(0.02)
    wall = time.monotonic() - began
    assert proc.returncode == 0, proc.returncode
    from django.db.models import Max, Min

    span = Job.objects.aggregate(first=Min("started_at"), last=Max("finished_at"))
    done = Job.objects.filter(state="succeeded", result=200).count()
    return {
        "kind": kind,
        "slots": slots,
        "done": done,
        "wall_s": wall,
        "run_s": (span["last"] - span["first"]).total_seconds(),
        "peak_rss_mb": peak,
    }


def run_pgqueuer(python: str, server_url: str, *, spec: str, jobs: int, delay_ms: int) -> dict:
    """Run pgqueuer's drain of the same jobs (``bench/peers/pgq_http.py``); return its row."""
    import json

    import psycopg

    base, _, name = PEERS_URL.rpartition("/")
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    batch, most = spec.split(":")
    script = str(ROOT / "bench" / "peers" / "pgq_http.py")
    url = f"{server_url}/delay/{delay_ms}"
    env = {**os.environ, "PEERS_DATABASE_URL": PEERS_URL}
    done = subprocess.run(
        [python, script, str(jobs), url, batch, most],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    row = json.loads(done.stdout.strip().splitlines()[-1])
    return {"kind": f"pgqueuer batch {batch}", "slots": int(most), **row}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--delay-ms", type=int, default=500)
    parser.add_argument("--async", dest="async_", default="2000", help="async slots to try")
    parser.add_argument("--sync", default="25,200", help="thread counts to try")
    parser.add_argument("--pgqueuer", default="", help="BATCH:MAX_CONCURRENT,... to try")
    parser.add_argument(
        "--peers-python", default=str(ROOT / "bench" / ".venv-peers" / "bin" / "python")
    )
    args = parser.parse_args()
    env = bench_env(URL)
    env["JOBQUEUE_LOG_LEVEL"] = "WARNING"
    recreate_database(URL, env)
    import django

    django.setup()
    from tests.httpserver import LocalHTTPServer

    server = LocalHTTPServer().start()
    rows = []
    try:
        plan: list[tuple[str, int | str]] = [("async", int(n)) for n in args.async_.split(",") if n]
        plan += [("sync", int(n)) for n in args.sync.split(",") if n]
        plan += [("pgqueuer", spec) for spec in args.pgqueuer.split(",") if spec]
        for kind, slots in plan:
            if kind == "pgqueuer":
                row = run_pgqueuer(
                    args.peers_python,
                    server.url,
                    spec=str(slots),
                    jobs=args.jobs,
                    delay_ms=args.delay_ms,
                )
            else:
                row = run_one(
                    env,
                    server.url,
                    kind=kind,
                    slots=int(slots),
                    jobs=args.jobs,
                    delay_ms=args.delay_ms,
                )
            rows.append(row)
            r = rows[-1]
            print(
                f"{r['kind']:>5} {r['slots']:>5} slots: {r['done']}/{args.jobs} done, "
                f"wall {r['wall_s']:.2f} s, run {r['run_s']:.2f} s, "
                f"peak RSS {r['peak_rss_mb']:.0f} MB",
                flush=True,
            )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
