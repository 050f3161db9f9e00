"""Scale past one primary's connections: many worker processes through a real PgBouncer.

Issue 16, part 4: a private cluster with ``max_connections`` 50 (tests/pgcluster.py), a private
PgBouncer in transaction mode in front of it (tests/pgbouncer.py, ``default_pool_size`` 20),
``--workers`` ``runworkers`` processes of ``--slots`` slots each in pooler mode, draining
``--jobs`` no-op jobs enqueued through the pooler by a "web" process. A sampler reads the
server's client backends (``pg_stat_activity``) and PgBouncer's ``SHOW POOLS`` every 0.5 s.
Then the same workers straight to the cluster, without the pooler: the bench says how that
fails (processes refused with "remaining connection slots are reserved", and a web request's
connection, tried at every sample as the site's role, refused while the workers hold every slot).

Run (about 3-6 minutes on 2 cores)::

    .venv/bin/python bench/scale.py                      # 40 workers x 10 slots, 20,000 jobs
    .venv/bin/python bench/scale.py --workers 8 --jobs 2000   # a quick look

Printed: enqueue jobs/s through the pooler, drain jobs/s (wall: from starting the processes
to the last success, so it includes their start; span: first start to last finish, database
clock), succeeded / not, connection errors
in the workers' logs, the most server connections seen (all, and jobqueue's), PgBouncer's most
waiting clients and longest wait; for the direct run, the same and the refusals.

The pooled workers poll (``POLL_INTERVAL_SECONDS`` 0.5) rather than LISTEN: one direct
listening connection per process (40) plus the pool (20) would not fit under 50, which is the
point of this scenario (docs/capacity.md).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg

from bench._clusters import (
    as_role,
    django_env,
    migrate,
    start_bouncer,
    start_cluster,
    statement_totals,
)
from bench._common import ROOT
from tests.pgbouncer import PrivateBouncer, pgbouncer_binary

NOOP = "tests.testapp.jobs.noop"
#: The role the site's processes (web and workers) log in as: not a superuser.
APP_ROLE = "shop"
QUEUE = "scale"
DBNAME = "scale"
#: What a refused or broken connection prints in a worker's log.
CONNECTION_ERRORS = re.compile(
    r"too many clients|remaining connection slots|connection refused|"
    r"server closed the connection|OperationalError|query_wait_timeout|no more connections",
    re.IGNORECASE,
)

ENQUEUE = f"""
import sys, time, django
django.setup()
import jobqueue
n, chunk = int(sys.argv[1]), int(sys.argv[2])
start = time.perf_counter()
for first in range(0, n, chunk):
    jobqueue.enqueue_many(
        [{{"queue": "{QUEUE}", "job_type": "{NOOP}", "payload": {{}}}}
         for _ in range(first, min(n, first + chunk))]
    )
print(n / (time.perf_counter() - start))
"""


class Sampler(threading.Thread):
    """Every 0.5 s: server client backends of the bench database, and PgBouncer's pools."""

    def __init__(self, direct_url: str, bouncer: PrivateBouncer | None, web_url: str) -> None:
        super().__init__(daemon=True)
        self.direct_url, self.bouncer, self.web_url = direct_url, bouncer, web_url
        #: A web request's connection, as the site's role, the way the workers reach the
        #: database: tried at each sample; how many were refused.
        self.web_tries = 0
        self.web_refused = 0
        self.max_backends = 0
        self.max_waiting = 0
        self.longest_wait_s = 0.0
        self.samples = 0
        self.errors: list[str] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        try:
            with psycopg.connect(self.direct_url, autocommit=True) as conn:
                while not self.stopping.wait(0.5):
                    self._sample(conn)
        except psycopg.Error as exc:  # the sampler itself refused: say so, do not hide it
            self.errors.append(f"{type(exc).__name__}: {exc}")

    def _sample(self, conn: psycopg.Connection) -> None:
        own = conn.info.backend_pid
        row = conn.execute(
            "SELECT count(*)"
            " FROM pg_stat_activity WHERE datname = %s AND backend_type = 'client backend'"
            " AND pid <> %s",
            [DBNAME, own],
        ).fetchone()
        assert row is not None
        self.max_backends = max(self.max_backends, row[0])
        self.web_tries += 1
        try:
            with psycopg.connect(self.web_url, autocommit=True, connect_timeout=5) as web:
                web.execute("SELECT 1")
        except psycopg.OperationalError:
            self.web_refused += 1
        if self.bouncer is not None:
            for pool in self.bouncer.show_pools(DBNAME):
                self.max_waiting = max(self.max_waiting, int(pool["cl_waiting"]))
                wait = int(pool.get("maxwait", 0)) + int(pool.get("maxwait_us", 0)) / 1e6
                self.longest_wait_s = max(self.longest_wait_s, wait)
        self.samples += 1


#: The sampler's read of the jobs (its text in pg_stat_statements, left out of the counts).
COUNTS_QUERY = "%FROM jobqueue_job WHERE queue = $1 GROUP BY state%"


def counts(direct_url: str) -> dict[str, int]:
    """Jobs of the bench queue by state."""
    with psycopg.connect(direct_url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT state, count(*) FROM jobqueue_job WHERE queue = %s GROUP BY state", [QUEUE]
        ).fetchall()
    return {state: n for state, n in rows}


def server_counters(direct_url: str) -> tuple[int, int, float]:
    """(WAL position in bytes, statements run by jobqueue's connections so far, and their
    execution time in milliseconds, planning included).

    Statements are pg_stat_statements' calls in the bench database, leaving out the sampler's
    and this module's own reads (bench/_clusters.py, ``statement_totals``).
    """
    with psycopg.connect(direct_url, autocommit=True) as conn:
        row = conn.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint").fetchone()
    assert row is not None
    calls, ms = statement_totals(direct_url, DBNAME, skip=(COUNTS_QUERY,))
    return int(row[0]), calls, ms


def storage_per_job(direct_url: str, payload_bytes: int, n: int = 10_000) -> float:
    """Bytes of table, index and TOAST per finished job with a ``payload_bytes`` payload.

    Empties the jobs table first (run last).
    """
    payload = json.dumps({"data": "x" * max(payload_bytes - 12, 0)})
    with psycopg.connect(direct_url, autocommit=True) as conn:
        # From an empty table: after the drains, freed space would take the new rows in and
        # hide their size.
        conn.execute("TRUNCATE jobqueue_job CASCADE")
        before = conn.execute("SELECT pg_total_relation_size('jobqueue_job')").fetchone()
        conn.execute(
            "INSERT INTO jobqueue_job (queue, type, payload, priority, tenant_id, state, run_at,"
            " attempts, max_attempts, timeout_s, leased_by, errors, dead_reason, created_at,"
            " started_at, finished_at, result)"
            " SELECT 'storage', %s, %s::jsonb, 0, '', 'succeeded', now(), 1, 8, 30, 'w', '[]',"
            " '', now(), now(), now(), '{\"ok\": true}'::jsonb FROM generate_series(1, %s)",
            [NOOP, payload, n],
        )
        conn.execute("VACUUM ANALYZE jobqueue_job")
        after = conn.execute("SELECT pg_total_relation_size('jobqueue_job')").fetchone()
        conn.execute("DELETE FROM jobqueue_job WHERE queue = 'storage'")
    assert before is not None and after is not None
    return (after[0] - before[0]) / n


def span_s(direct_url: str) -> float:
    """Seconds from the first job's start to the last one's finish (database clock)."""
    with psycopg.connect(direct_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT extract(epoch FROM max(finished_at) - min(started_at)) FROM jobqueue_job"
            " WHERE queue = %s AND state = 'succeeded'",
            [QUEUE],
        ).fetchone()
    return float(row[0] or 0.0) if row else 0.0


def worker_env(url: str, settings: dict[str, object], direct_url: str | None) -> dict[str, str]:
    """The environment of a process that uses ``url`` as its default database."""
    extra = {} if direct_url is None else {"JOBQUEUE_DIRECT_URL": direct_url}
    return django_env(url, settings, **extra)


def drain(
    label: str,
    url: str,
    direct_url: str,
    settings: dict[str, object],
    args: argparse.Namespace,
    bouncer: PrivateBouncer | None,
    give_up_s: float,
) -> dict[str, object]:
    """Enqueue ``args.jobs`` through ``url``, drain them with ``args.workers`` processes."""
    with psycopg.connect(direct_url, autocommit=True) as conn:
        conn.execute("DELETE FROM jobqueue_job")
        conn.execute("DELETE FROM jobqueue_worker")
    env = worker_env(url, settings, None)
    wal0, statements0, ms0 = server_counters(direct_url)
    done = subprocess.run(
        [sys.executable, "-c", ENQUEUE, str(args.jobs), "1000"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"{label}: enqueue failed:\n{done.stderr[-2000:]}")
    enqueue_rate = float(done.stdout.strip().splitlines()[-1])
    wal1, statements1, ms1 = server_counters(direct_url)

    slug = re.sub(r"[^a-z]+", "-", label.lower()).strip("-")
    logdir = Path(tempfile.mkdtemp(prefix=f"jobqueue-scale-{slug}-"))
    sampler = Sampler(direct_url, bouncer, url)
    sampler.start()
    cmd = [
        sys.executable,
        "-m",
        "django",
        "runworkers",
        "--queues",
        QUEUE,
        "--concurrency",
        str(args.slots),
        "--no-scheduler",
    ]
    procs = []
    start = time.monotonic()
    for i in range(args.workers):
        log = (logdir / f"worker-{i}.log").open("wb")
        procs.append(subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT))
    succeeded = 0
    last_progress, last_count = time.monotonic(), -1
    while True:
        time.sleep(0.5)
        state = counts(direct_url)
        succeeded = state.get("succeeded", 0)
        if succeeded != last_count:
            last_progress, last_count = time.monotonic(), succeeded
        if succeeded >= args.jobs:
            break
        stalled = time.monotonic() - last_progress
        if time.monotonic() - start > give_up_s or (stalled > 60 and succeeded > 0):
            break
    elapsed = time.monotonic() - start
    exited_early = sum(1 for p in procs if p.poll() is not None)
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    sampler.stopping.set()
    sampler.join()
    error_lines = []
    refused = 0
    for log in sorted(logdir.glob("*.log")):
        text = log.read_text(errors="replace")
        hits = [line for line in text.splitlines() if CONNECTION_ERRORS.search(line)]
        error_lines += hits
        refused += bool(re.search(r"too many clients|remaining connection slots", text))
    state = counts(direct_url)
    span = span_s(direct_url)
    wal2, statements2, ms2 = server_counters(direct_url)
    ran = max(state.get("succeeded", 0), 1)
    return {
        "label": label,
        "enqueue_jobs_s": enqueue_rate,
        "drain_jobs_s_wall": state.get("succeeded", 0) / elapsed,
        "drain_jobs_s_span": state.get("succeeded", 0) / span if span else 0.0,
        "seconds": elapsed,
        "enqueue_wal_bytes_per_job": (wal1 - wal0) / args.jobs,
        "enqueue_statements_per_job": (statements1 - statements0) / args.jobs,
        "drain_wal_bytes_per_job": (wal2 - wal1) / ran,
        "drain_statements_per_job": (statements2 - statements1) / ran,
        "enqueue_db_ms_per_job": (ms1 - ms0) / args.jobs,
        "drain_db_ms_per_job": (ms2 - ms1) / ran,
        "states": state,
        "exited_early": exited_early,
        "refused_processes": refused,
        "connection_error_lines": len(error_lines),
        "first_errors": sorted(set(e.strip()[:160] for e in error_lines))[:3],
        "max_backends": sampler.max_backends,
        "web_connections_refused": f"{sampler.web_refused} of {sampler.web_tries}",
        "max_waiting_clients": sampler.max_waiting,
        "longest_wait_s": sampler.longest_wait_s,
        "samples": sampler.samples,
        "sampler_errors": sampler.errors,
        "logdir": str(logdir),
    }


def report(result: dict[str, object]) -> None:
    """Print one run's figures."""
    print(f"\n== {result['label']}")
    for key, value in result.items():
        if key == "label":
            continue
        if isinstance(value, float):
            value = f"{value:,.3f}" if abs(value) < 10 else f"{value:,.1f}"
        print(f"  {key:28} {value}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=40)
    parser.add_argument("--slots", type=int, default=10)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--pool-size", type=int, default=20)
    parser.add_argument("--max-connections", type=int, default=50)
    parser.add_argument(
        "--skip-direct", action="store_true", help="leave out the run without the pooler"
    )
    args = parser.parse_args()
    if pgbouncer_binary() is None:
        raise SystemExit("pgbouncer is not installed (apt-get install pgbouncer)")

    # The site's processes log in as an ordinary role; the bench's own readings as the
    # superuser, whose reserved slots (superuser_reserved_connections) stay free when the
    # workers have taken every other one: that is how the run without the pooler is seen.
    cluster = start_cluster(DBNAME, max_connections=args.max_connections, owner=APP_ROLE)
    bouncer = None
    try:
        direct_url = cluster.url(DBNAME)
        app_url = as_role(direct_url, APP_ROLE)
        migrate(worker_env(app_url, {}, None))
        bouncer = start_bouncer(cluster, args.pool_size, APP_ROLE)
        pooled_url = as_role(bouncer.url(DBNAME), APP_ROLE)
        pooled = {
            "POOLED_DATABASES": {"default": {}},
            "POLL_INTERVAL_SECONDS": 0.5,
        }
        print(
            f"scale: {args.workers} worker processes x {args.slots} slots,"
            f" {args.jobs:,} no-op jobs;"
            f" cluster max_connections={args.max_connections}, PgBouncer transaction mode,"
            f" pool {args.pool_size}; load average {os.getloadavg()[0]:.1f}"
        )
        pooled_run = drain(
            "through PgBouncer (pooler mode, polling)",
            pooled_url,
            direct_url,
            pooled,
            args,
            bouncer,
            give_up_s=1800,
        )
        report(pooled_run)
        if not args.skip_direct:
            direct_run = drain(
                "straight to the cluster (no pooler)",
                app_url,
                direct_url,
                {"POLL_INTERVAL_SECONDS": 0.5},
                args,
                None,
                give_up_s=max(120.0, 3 * float(pooled_run["seconds"])),  # type: ignore[arg-type]
            )
            report(direct_run)
        for size in (1024,):
            print(
                f"\nstorage per finished job, {size} B payload:"
                f" {storage_per_job(direct_url, size):,.0f} bytes (table, TOAST, indexes)"
            )
        print(f"\nload average at the end {os.getloadavg()[0]:.1f}")
    finally:
        if bouncer is not None:
            bouncer.stop()
        cluster.destroy()


if __name__ == "__main__":
    main()
