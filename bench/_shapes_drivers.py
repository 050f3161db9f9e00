"""The two systems as ``bench/shapes.py`` drives them: databases copied from a template per
run, jobqueue's ``runworkers`` and enqueuer, pgqueuer's ``pgq run`` consumers and enqueue, the
reads that time a drain, and the private cluster (its server CPU from /proc, PgBouncer in front).

Every write to jobqueue goes through its public API (``bench/shape_enqueue.py``, a Django child
process); reads are SQL on the documented columns; each run gets a fresh copy of a template
database, so a table a new claim adds starts consistent without this module knowing of it.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import psycopg

from bench._clusters import (
    as_role,
    django_env,
    migrate,
    start_bouncer,
    start_cluster,
)
from bench._common import ROOT

HERE = Path(__file__).resolve().parent
NOOP = "tests.testapp.jobs.noop"
PGQ = str(Path(sys.executable).with_name("pgq"))
#: The role the private cluster's jobqueue database belongs to (PgBouncer lets it in).
APP_ROLE = "shop"


# -- databases: a template per system, a fresh copy per run -----------------------------------


def admin_url(url: str) -> str:
    return url.rpartition("/")[0] + "/postgres"


def db_name(url: str) -> str:
    return url.rpartition("/")[2]


@dataclass
class Target:
    """One server: jobqueue's database and pgqueuer's, each copied from its template per run."""

    jq_url: str
    pgq_url: str
    #: The URL jobqueue's processes use (a role's, or PgBouncer's); default: jq_url.
    app_url: str | None = None
    owner: str | None = None
    made: set[str] = field(default_factory=set)

    def prepare(self) -> None:
        """Make both templates: jobqueue migrated, pgqueuer installed (``pgq install``)."""
        fresh_database(self.jq_url + "_tpl", template=None, owner=self.owner)
        fresh_database(self.pgq_url + "_tpl", template=None)
        migrate(django_env(self._as_app(self.jq_url + "_tpl")))
        subprocess.run(
            [PGQ, "install"],
            env={**os.environ, "PGDSN": self.pgq_url + "_tpl"},
            check=True,
            capture_output=True,
        )

    def _as_app(self, url: str) -> str:
        return as_role(url, self.owner) if self.owner else url

    def fresh_jq(self) -> None:
        fresh_database(self.jq_url, template=db_name(self.jq_url) + "_tpl", owner=self.owner)

    def fresh_pgq(self) -> None:
        fresh_database(self.pgq_url, template=db_name(self.pgq_url) + "_tpl")

    def drop(self) -> None:
        for url in (self.jq_url, self.pgq_url):
            for name in (db_name(url), db_name(url) + "_tpl"):
                with psycopg.connect(admin_url(url), autocommit=True) as conn:
                    conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def fresh_database(url: str, template: str | None, owner: str | None = None) -> None:
    name = db_name(url)
    with psycopg.connect(admin_url(url), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        clause = f' TEMPLATE "{template}"' if template else ""
        clause += f" OWNER {owner}" if owner else ""
        conn.execute(f'CREATE DATABASE "{name}"{clause}')


def rows(url: str, statement: str, params: list | None = None) -> list[tuple]:
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(statement, params)
        return cur.fetchall() if cur.description else []


def wait_for(what: str, check: Callable[[], bool], timeout_s: float, step: float = 0.05) -> None:
    """Poll ``check`` until it is true; exit the bench naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit(f"shapes: {what} not reached within {timeout_s:.0f} s")
        time.sleep(step)


def percentile(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, max(0, round(p / 100 * (len(values) - 1))))]


# -- jobqueue: workers and the enqueuer --------------------------------------------------------

LOGS = Path(tempfile.mkdtemp(prefix="jobqueue-shapes-"))


def jq_env(target: Target, settings: dict | None = None, via: str | None = None) -> dict:
    url = via or target.app_url or target.jq_url
    env = django_env(url, settings or {})
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(HERE.parent)])
    return env


def jq_client(env: dict, mode: str, spec: dict) -> dict:
    """Run ``bench/shape_enqueue.py MODE SPEC`` (public enqueue API); return its JSON."""
    done = subprocess.run(
        [sys.executable, str(HERE / "shape_enqueue.py"), mode, json.dumps(spec)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"shapes: enqueue ({mode}) failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def jq_workers(env: dict, processes: int | None = None, concurrency: int | None = None):
    """Start one ``runworkers`` (``--processes``/``--concurrency`` only when given)."""
    cmd = [sys.executable, "-m", "django", "runworkers"]
    if processes:
        cmd += ["--processes", str(processes)]
    if concurrency:
        cmd += ["--concurrency", str(concurrency)]
    log = (LOGS / f"runworkers-{time.monotonic_ns()}.log").open("wb")
    return subprocess.Popen(
        cmd, env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )


def stop(procs: list[subprocess.Popen]) -> None:
    """SIGTERM each process's group (a supervisor and its workers), then wait; kill after 60 s."""
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def jq_ready(target: Target, processes: int, timeout_s: float = 300) -> None:
    """Wait until ``processes`` worker processes are registered."""
    wait_for(
        f"{processes} jobqueue worker processes registered",
        lambda: rows(target.jq_url, "SELECT count(*) FROM jobqueue_worker")[0][0] >= processes,
        timeout_s,
        0.2,
    )


def jq_warm(target: Target, env: dict, processes: int) -> int:
    """Run 2 no-op jobs per process to completion, then 1 s idle; return the last id."""
    last = jq_client(env, "each", {"type": NOOP, "n": 2 * processes})["last"]
    wait_for(
        "warm-up jobs done",
        lambda: (
            rows(target.jq_url, "SELECT count(*) FROM jobqueue_job WHERE state = 'succeeded'")[0][0]
            >= 2 * processes
        ),
        120,
    )
    time.sleep(1.0)
    return last


def jq_span(target: Target, first: int, last: int) -> tuple[int, float]:
    """Return (succeeded, seconds from first start to last finish) of ids first..last."""
    [(done, span)] = rows(
        target.jq_url,
        "SELECT count(*) FILTER (WHERE state = 'succeeded'),"
        " extract(epoch FROM max(finished_at) - min(started_at))::float8"
        " FROM jobqueue_job WHERE id BETWEEN %s AND %s",
        [first, last],
    )
    return int(done), float(span or 0.0)


def jq_wait_done(target: Target, first: int, last: int, timeout_s: float) -> None:
    n = last - first + 1
    wait_for(
        f"{n:,} jobqueue jobs succeeded",
        lambda: jq_span(target, first, last)[0] >= n,
        timeout_s,
        0.1,
    )


# -- pgqueuer ---------------------------------------------------------------------------------


def pgq_env(target: Target, stamp: Path | None = None, keyed: bool = False) -> dict:
    """The environment of ``pgq run pgq_app:main``: ``stamp`` registers the ``stamp``
    entrypoint, ``keyed`` the limited one (bench/peers/pgq_app.py)."""
    env = {
        **os.environ,
        "PGDSN": target.pgq_url,
        "PEERS_DATABASE_URL": target.pgq_url,
        "PYTHONPATH": str(HERE / "peers"),
    }
    if stamp is not None:
        env["PGQ_STAMP_FILE"] = str(stamp)
    if keyed:
        env["PGQ_KEYED"] = "1"
    return env


def pgq_workers(target: Target, processes: int, stamp: Path | None = None, keyed: bool = False):
    """Start ``processes`` ``pgq run pgq_app:main`` consumers, as its CLI starts them."""
    procs = []
    for _ in range(processes):
        log = (LOGS / f"pgq-{time.monotonic_ns()}.log").open("wb")
        procs.append(
            subprocess.Popen(
                [PGQ, "run", "pgq_app:main"],
                env=pgq_env(target, stamp, keyed),
                cwd=HERE / "peers",
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )
    return procs


async def _pgq_enqueue(
    url: str, entrypoint: str, payloads: list[bytes], batch: bool, after_s: float = 0.0
) -> tuple[list[int], dict[str, float]]:
    """Enqueue through ``Queries.enqueue``: one call of lists (``batch``), or one call per job
    (each timed just before the call); return (ids, {payload: wall time sent})."""
    import asyncpg
    from pgqueuer.db import AsyncpgDriver
    from pgqueuer.queries import Queries

    conn = await asyncpg.connect(url)
    try:
        queries = Queries(AsyncpgDriver(conn))
        sent: dict[str, float] = {}
        if batch:
            n = len(payloads)
            after = [timedelta(seconds=after_s)] * n if after_s else None
            ids = await queries.enqueue([entrypoint] * n, list(payloads), [0] * n, after)
        else:
            ids = []
            for payload in payloads:
                sent[payload.decode()] = time.time()
                ids += await queries.enqueue(entrypoint, payload)
        return list(ids), sent
    finally:
        await conn.close()


def pgq_enqueue(target: Target, entrypoint: str, payloads: list[bytes], **kw) -> tuple:
    return asyncio.run(_pgq_enqueue(target.pgq_url, entrypoint, payloads, batch=True, **kw))


def pgq_count(target: Target, status: str, after_id: int = 0) -> int:
    return rows(
        target.pgq_url,
        "SELECT count(*) FROM pgqueuer_log WHERE status = %s AND job_id > %s",
        [status, after_id],
    )[0][0]


def pgq_ready(target: Target, processes: int) -> int:
    """Wait for ``processes`` consumers' connections, run 2 warm-up jobs per process, 1 s
    idle; return the last warm-up id."""
    wait_for(
        f"{processes} pgqueuer consumers connected",
        lambda: (
            rows(
                target.pgq_url,
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE datname = %s AND pid <> pg_backend_pid()",
                [db_name(target.pgq_url)],
            )[0][0]
            >= processes
        ),
        300,
        0.2,
    )
    last = 0
    for i in range(2 * processes):
        ids, _ = asyncio.run(_pgq_enqueue(target.pgq_url, "noop", [b"w%d" % i], batch=False))
        last = max(last, *ids)
    wait_for(
        "pgqueuer warm-up done",
        lambda: pgq_count(target, "successful") >= 2 * processes,
        120,
    )
    time.sleep(1.0)
    return last


def pgq_span(target: Target, after_id: int) -> tuple[int, float]:
    [(done, span)] = rows(
        target.pgq_url,
        "SELECT count(*) FILTER (WHERE status = 'successful'),"
        " extract(epoch FROM max(created) FILTER (WHERE status = 'successful')"
        " - min(created) FILTER (WHERE status = 'picked'))::float8"
        " FROM pgqueuer_log WHERE job_id > %s",
        [after_id],
    )
    return int(done), float(span or 0.0)


def pgq_wait_done(target: Target, after_id: int, n: int, timeout_s: float) -> None:
    wait_for(
        f"{n:,} pgqueuer jobs successful",
        lambda: pgq_count(target, "successful", after_id) >= n,
        timeout_s,
        0.1,
    )


# -- drains: one run each ---------------------------------------------------------------------


def drain_jq(
    target: Target,
    n: int,
    processes: int | None = None,
    concurrency: int | None = None,
    tenants: int = 0,
    settings: dict | None = None,
) -> float:
    """Return jobs/s of n no-op jobs (round robin over ``tenants``) through long-running
    workers: n / (last finish - first start)."""
    target.fresh_jq()
    env = jq_env(target, settings)
    procs = [jq_workers(env, processes, concurrency)]
    try:
        jq_ready(target, processes or 1)
        jq_warm(target, env, processes or 1)
        ids = jq_client(env, "bulk", {"groups": [{"type": NOOP, "n": n, "tenants": tenants}]})
        jq_wait_done(target, ids["first"], ids["last"], 600)
    finally:
        stop(procs)
    done, span = jq_span(target, ids["first"], ids["last"])
    return done / span


def drain_pgq(target: Target, n: int, processes: int, keyed: bool = False) -> float:
    """Return jobs/s of n no-op jobs through ``processes`` long-running ``pgq run`` (``keyed``:
    with the limited entrypoint registered too, unused)."""
    target.fresh_pgq()
    procs = pgq_workers(target, processes, keyed=keyed)
    try:
        warm = pgq_ready(target, processes)
        pgq_enqueue(target, "noop", [b"{}"] * n)
        pgq_wait_done(target, warm, n, 600)
    finally:
        stop(procs)
    done, span = pgq_span(target, warm)
    return done / span


# -- the private cluster: its server CPU, PgBouncer in front ---------------------------------


def server_cpu_s(datadir: Path) -> float:
    """Return the CPU seconds (user + system) the server's processes have used so far: the
    postmaster's own and its reaped children's, plus every live child's."""
    tick = os.sysconf("SC_CLK_TCK")
    postmaster = int((datadir / "postmaster.pid").read_text().split()[0])
    total = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        fields = stat.rpartition(")")[2].split()
        pid, ppid = int(entry.name), int(fields[1])
        if pid == postmaster:
            total += sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
        elif ppid == postmaster:
            total += int(fields[11]) + int(fields[12])
    return total / tick


@dataclass
class Cluster:
    """A private cluster (tests/pgcluster.py, pg_stat_statements) with both systems' templates
    and a PgBouncer in transaction mode in front."""

    cluster: object
    target: Target
    bouncer: object | None
    pooled: Target | None


def start_private(with_bouncer: bool) -> Cluster:
    cluster = start_cluster("shapes_tpl", max_connections=300, owner=APP_ROLE)
    base = cluster.url("shapes")
    target = Target(jq_url=base, pgq_url=cluster.url("shapes_pgq"), owner=APP_ROLE)
    target.app_url = as_role(base, APP_ROLE)
    # start_cluster made shapes_tpl (pg_stat_statements in it); migrate it, install pgqueuer.
    migrate(django_env(as_role(base + "_tpl", APP_ROLE)))
    fresh_database(target.pgq_url + "_tpl", template=None)
    subprocess.run(
        [PGQ, "install"], env={**os.environ, "PGDSN": target.pgq_url + "_tpl"}, check=True,
        capture_output=True,
    )  # fmt: skip
    bouncer = pooled = None
    if with_bouncer:
        bouncer = start_bouncer(cluster, 20, APP_ROLE)
        pooled = Target(jq_url=base, pgq_url=target.pgq_url, owner=APP_ROLE)
        pooled.app_url = as_role(bouncer.url("shapes"), APP_ROLE)
    return Cluster(cluster, target, bouncer, pooled)


def stop_private(private: Cluster) -> None:
    if private.bouncer is not None:
        private.bouncer.stop()
    private.cluster.destroy()


def statement_top(url: str, db: str, limit: int = 5) -> list[tuple[int, float, str]]:
    """Return the ``limit`` statements run most often in ``db`` since the last reset: (calls,
    mean ms of execution + planning, the statement's start, one line)."""
    found = rows(
        url,
        "SELECT s.calls, (s.total_exec_time + s.total_plan_time) / s.calls,"
        " left(regexp_replace(s.query, '\\s+', ' ', 'g'), 90)"
        " FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid"
        " WHERE d.datname = %s AND s.query NOT ILIKE '%%pg_stat%%'"
        " ORDER BY s.calls DESC LIMIT %s",
        [db, limit],
    )
    return [(int(c), float(ms), str(q)) for c, ms, q in found]
