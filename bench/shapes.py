"""Shapes of load: fairness, limits, pickup, idle cost and drain, side by side with pgqueuer.

    .venv/bin/python bench/shapes.py                        # every row, median of 3 (~20 min)
    .venv/bin/python bench/shapes.py --quick                # smaller, 1 repeat (a smoke run)
    .venv/bin/python bench/shapes.py --only pickup,drain    # some rows only

One run measures both systems, interleaved: for each repeat, every variant of a row runs once
(jobqueue's and pgqueuer's alternating), and the row reports the median of the repeats (min-max);
a ratio is the median of the per-repeat ratios, whose two sides shared a repeat's load. Each
system runs on its own defaults: jobqueue's ``manage.py runworkers`` with no flags but the
shape's ``--processes`` / ``--concurrency`` (queue ``default``, the test settings plus the
row's ``JOBQUEUE`` entries); pgqueuer 1.6 as ``pgq run pgq_app:main`` starts it (continuous
mode, batch 10, one asyncio consumer per process; ``bench/peers/pgq_app.py``). Workers are
long-running: started first, waited for (registered, a warm-up job done, 1 s idle), then the
jobs are enqueued in one transaction, and the workers are stopped (SIGTERM) only after the
figure is read. Every run gets a fresh copy of a migrated template database (jobqueue) or an
installed one (pgqueuer), so nothing carries over. Enqueues use only jobqueue's public API
(``bench/shape_enqueue.py``, a Django child process), so the bench measures whatever claim the
checkout has; reads are plain SQL on the documented columns (``started_at``, ``finished_at``).

Rows (``--only``):

* ``tenants``: 5,000 no-op jobs dealt round robin over 100, 1,000 and 10,000 tenants, against
  one tenant, at ``--processes 2``: drain jobs/s and the ratio to one tenant; pgqueuer (no
  tenants) at 2 processes beside.
* ``hot``: a type limited to 100/s (``RATE_LIMITS``) with 1,000 jobs waiting; 3 s later 20
  jobs of an unlimited type in the same queue: their start delay (handler start - the wall time
  ``enqueue`` was called), p50 / p99. jobqueue only (pgqueuer has no rate limits).
* ``weights``: ``TENANT_WEIGHTS`` gold 3, std 1, each with a deep backlog of 20 ms jobs, at
  2x10, 4x5, 8x3 and 16x1 (processes x concurrency): gold:std jobs finished in a window.
* ``ckey``: jobs of one concurrency key with limit 2, 50 ms each, a backlog: the fraction of
  the limit in use from the first start to the last finish (sum of leased time / (2 x span));
  pgqueuer's entrypoint ``concurrency_limit=2`` beside.
* ``pickup``: one idle worker process, 200 jobs enqueued one every 20 ms: handler start - the
  wall time ``enqueue`` was called, p50 / p99; pgqueuer's idle consumer the same way.
* ``idle``: ``--idle-processes`` idle worker processes on a private cluster: the server's CPU
  (its processes' utime + stime from /proc, the cluster's own idle CPU subtracted) per process,
  and per 1,000 processes; statements per second per process (pg_stat_statements). Direct
  (LISTEN), and through PgBouncer in transaction mode (``POOLED_DATABASES``: polling);
  pgqueuer direct (it needs LISTEN, so no transaction-mode pooler).
* ``drain``: 5,000 no-op jobs at 1 process, 2 processes (defaults) and 2x10; pgqueuer at 1
  and 2 processes; the batched raw-SQL limit (``bench/core.py``'s claim 100 + ack 100).
* ``method``: pgqueuer at 1 process drained the peers bench's way (``bench/peers/pgq.py``:
  ``pgq run --mode drain`` started after the enqueue, wall time from its start to its exit)
  beside this bench's way (long-running, first pick to last done), and that run's consumer
  CPU: why the two benches' pgqueuer figures differ (docs/performance.md).
* ``cpu``: database CPU per job on a private cluster, 5,000 no-op jobs drained by one process
  of 10 slots, over 100 tenants and one tenant; pgqueuer's one process beside. The jobs are
  enqueued 2 s in the future (``delay=``, pgqueuer's ``execute_after``) so that the CPU window
  (enqueue returned -> last done) holds the drain, not the enqueue; its idle second is in it.

Drain rate = jobs / (last finish - first start), both from the database clock: jobqueue's
``max(finished_at) - min(started_at)``; pgqueuer's ``pgqueuer_log`` rows ``successful`` (written
when its consumer flushes its completions) and ``picked`` (its dequeue). The private cluster
(``idle``, ``cpu``) runs with ``fsync=off`` (tests/pgcluster.py); the rest use the server at
``BENCH_DATABASE_URL`` (default ``postgres://postgres@127.0.0.1:5432/jq_shapes``; pgqueuer's
database is the same name + ``_pgq``). Needs pgqueuer in this virtualenv
(``.venv/bin/pip install 'pgqueuer[asyncpg]==1.6.0' 'typer<0.20'``) and, for ``idle``,
PgBouncer (``apt-get install pgbouncer``). Prints one table; the figures also land in
``bench/results/shapes.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import psycopg  # noqa: E402

from bench._clusters import (  # noqa: E402
    as_role,
    django_env,
    migrate,
    start_bouncer,
    start_cluster,
    statement_totals,
)
from bench._common import ROOT  # noqa: E402

URL = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/jq_shapes")
NOOP = "tests.testapp.jobs.noop"
SLEEPER = "tests.testapp.jobs.record"  # record(path, sleep_s): one line to a file, then sleep
PGQ = str(Path(sys.executable).with_name("pgq"))
ROWS = ("tenants", "hot", "weights", "ckey", "pickup", "drain", "method", "idle", "cpu")
#: The role the private cluster's jobqueue database belongs to (PgBouncer lets it in).
APP_ROLE = "shop"


# -- databases: a template per system, a fresh copy per run -----------------------------------


def _admin(url: str) -> str:
    return url.rpartition("/")[0] + "/postgres"


def _name(url: str) -> str:
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
        for url in (self.jq_url, self.pgq_url):
            _fresh(url + "_tpl", template=None, owner=self.owner if url == self.jq_url else None)
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
        _fresh(self.jq_url, template=_name(self.jq_url) + "_tpl", owner=self.owner)

    def fresh_pgq(self) -> None:
        _fresh(self.pgq_url, template=_name(self.pgq_url) + "_tpl")

    def drop(self) -> None:
        for url in (self.jq_url, self.pgq_url):
            for name in (_name(url), _name(url) + "_tpl"):
                with psycopg.connect(_admin(url), autocommit=True) as conn:
                    conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _fresh(url: str, template: str | None, owner: str | None = None) -> None:
    name = _name(url)
    with psycopg.connect(_admin(url), autocommit=True) as conn:
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


def pgq_env(target: Target, stamp: Path | None = None) -> dict:
    env = {
        **os.environ,
        "PGDSN": target.pgq_url,
        "PEERS_DATABASE_URL": target.pgq_url,
        "PYTHONPATH": str(HERE / "peers"),
    }
    if stamp is not None:
        env["PGQ_STAMP_FILE"] = str(stamp)
    return env


def pgq_workers(target: Target, processes: int, stamp: Path | None = None):
    """Start ``processes`` ``pgq run pgq_app:main`` consumers, as its CLI starts them."""
    procs = []
    for _ in range(processes):
        log = (LOGS / f"pgq-{time.monotonic_ns()}.log").open("wb")
        procs.append(
            subprocess.Popen(
                [PGQ, "run", "pgq_app:main"],
                env=pgq_env(target, stamp),
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
                [_name(target.pgq_url)],
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


def drain_pgq(target: Target, n: int, processes: int) -> float:
    """Return jobs/s of n no-op jobs through ``processes`` long-running ``pgq run``."""
    target.fresh_pgq()
    procs = pgq_workers(target, processes)
    try:
        warm = pgq_ready(target, processes)
        pgq_enqueue(target, "noop", [b"{}"] * n)
        pgq_wait_done(target, warm, n, 600)
    finally:
        stop(procs)
    done, span = pgq_span(target, warm)
    return done / span


# -- rows -------------------------------------------------------------------------------------


@dataclass
class Row:
    """One line of the printed table."""

    row: str
    figure: str
    values: list[float]
    unit: str
    pgq: list[float] | None = None
    note: str = ""

    def med(self, values: list[float] | None) -> str:
        if not values:
            return "-"
        m = statistics.median(values)
        spread = f" ({_fmt(min(values))}-{_fmt(max(values))})" if len(values) > 1 else ""
        return f"{_fmt(m)}{spread}"


def _fmt(x: float) -> str:
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.2f}" if abs(x) >= 1 else f"{x:.3g}"


def interleaved(repeats: int, variants: dict[str, Callable[[], object]]) -> dict[str, list]:
    """Run every variant once per repeat, in turn; return each variant's results."""
    results: dict[str, list] = {name: [] for name in variants}
    for r in range(repeats):
        for name, run in variants.items():
            value = run()
            results[name].append(value)
            print(f"  [{r + 1}/{repeats}] {name}: {_show(value)}", flush=True)
    return results


def ratio(values: list[float], others: list[float]) -> float:
    """Return the median of the per-repeat ratios ``values[i] / others[i]``: both sides of a
    repeat ran back to back, so they shared its load (the machine is shared)."""
    return statistics.median(a / b for a, b in zip(values, others, strict=True))


def _show(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.4g}"
    if isinstance(value, tuple):
        return " / ".join(_show(v) for v in value)
    return str(value)


def row_tenants(cfg: argparse.Namespace, target: Target) -> list[Row]:
    n = cfg.jobs
    variants: dict[str, Callable[[], object]] = {
        "1 tenant": lambda: drain_jq(target, n, processes=2),
    }
    for tenants in cfg.tenants:
        variants[f"{tenants:,} tenants"] = lambda t=tenants: drain_jq(
            target, n, processes=2, tenants=t
        )
    variants["pgqueuer"] = lambda: drain_pgq(target, n, 2)
    got = interleaved(cfg.repeats, variants)
    out = [
        Row(
            "tenants",
            f"drain {n:,}, 2 processes, 1 tenant (jobs/s)",
            got["1 tenant"],
            "jobs/s",
            pgq=got["pgqueuer"],
        )
    ]
    for tenants in cfg.tenants:
        values = got[f"{tenants:,} tenants"]
        out.append(
            Row(
                "tenants",
                f"same, {tenants:,} tenants round robin (jobs/s)",
                values,
                "jobs/s",
                note=f"{ratio(values, got['1 tenant']):.2f}x one tenant",
            )
        )
    return out


def hot_jq(target: Target, cfg: argparse.Namespace) -> tuple[float, float]:
    target.fresh_jq()
    env = jq_env(target, {"RATE_LIMITS": {"type": {NOOP: "100/s"}}})
    stampfile = LOGS / f"hot-{time.monotonic_ns()}.txt"
    procs = [jq_workers(env)]
    try:
        jq_ready(target, 1)
        spec = {
            "limited_type": NOOP,
            "limited": cfg.hot_backlog,
            "later_s": 3.0,
            "n": 20,
            "path": str(stampfile),
        }
        sent = jq_client(env, "hot", spec)["sent"]
        wait_for(
            "the 20 unlimited jobs started",
            lambda: stampfile.exists() and len(stampfile.read_text().splitlines()) >= 20,
            60 + cfg.hot_backlog / 100,
            0.1,
        )
        # That the limit held the backlog back: its jobs still waiting when the 20 were
        # enqueued, and the rate they ran at (both system clocks are this machine's).
        [(waiting, rate)] = rows(
            target.jq_url,
            "SELECT count(*) FILTER (WHERE started_at IS NULL OR started_at > to_timestamp(%s)),"
            " (count(started_at) - 1) / nullif(extract(epoch FROM max(started_at)"
            " - min(started_at)), 0)::float8 FROM jobqueue_job WHERE type = %s",
            [min(sent.values()), NOOP],
        )
    finally:
        stop(procs)
    delays = _delays(stampfile, sent)
    return percentile(delays, 50), percentile(delays, 99), float(waiting), float(rate or 0)


def _delays(stampfile: Path, sent: dict[str, float]) -> list[float]:
    """Return ms from each key's enqueue call to its handler's start (first start only)."""
    started: dict[str, float] = {}
    for line in stampfile.read_text().splitlines():
        key, at = line.split()
        started.setdefault(key, float(at))
    return [(started[key] - at) * 1000 for key, at in sent.items() if key in started]


def row_hot(cfg: argparse.Namespace, target: Target) -> list[Row]:
    got = interleaved(cfg.repeats, {"jobqueue": lambda: hot_jq(target, cfg)})
    p50 = [v[0] for v in got["jobqueue"]]
    p99 = [v[1] for v in got["jobqueue"]]
    waiting = statistics.median(v[2] for v in got["jobqueue"])
    rate = statistics.median(v[3] for v in got["jobqueue"])
    label = f"type at 100/s, {cfg.hot_backlog:,} waiting; 20 unlimited 3 s later: start delay"
    return [
        Row("hot", f"{label} p50 (ms)", p50, "ms", note="pgqueuer: no rate limits"),
        Row(
            "hot",
            f"{label} p99 (ms)",
            p99,
            "ms",
            note=f"{waiting:,.0f} limited jobs still waiting then; they ran at {rate:,.0f}/s",
        ),
    ]


def weights_jq(target: Target, cfg: argparse.Namespace, processes: int, slots: int) -> float:
    """Return gold:std jobs finished in the window (gold weighs 3)."""
    target.fresh_jq()
    env = jq_env(target, {"TENANT_WEIGHTS": {"gold": 3}})
    procs = [jq_workers(env, processes, slots)]
    try:
        jq_ready(target, processes)
        payload = {"path": os.devnull, "sleep_s": 0.02}
        ids = jq_client(
            env,
            "bulk",
            {
                "groups": [
                    {"type": SLEEPER, "payload": payload, "n": cfg.weights_backlog, "tenant": t}
                    for t in ("gold", "std")
                ]
            },
        )
        wait_for(
            "the weighted backlog started",
            lambda: (
                rows(
                    target.jq_url,
                    "SELECT count(*) FROM jobqueue_job WHERE id >= %s AND started_at IS NOT NULL",
                    [ids["first"]],
                )[0][0]
                > 0
            ),
            120,
        )
        # The window: 1 s of warm-up after the first start, then --weights-seconds.
        time.sleep(1.0 + cfg.weights_seconds + 0.5)
        [(t0,)] = rows(
            target.jq_url,
            "SELECT min(started_at) + interval '1 second' FROM jobqueue_job WHERE id >= %s",
            [ids["first"]],
        )
        counts = dict(
            rows(
                target.jq_url,
                "SELECT tenant_id, count(*) FROM jobqueue_job WHERE id >= %s"
                " AND state = 'succeeded' AND finished_at >= %s"
                " AND finished_at < %s + make_interval(secs => %s) GROUP BY tenant_id",
                [ids["first"], t0, t0, cfg.weights_seconds],
            )
        )
        left = rows(
            target.jq_url,
            "SELECT count(*) FROM jobqueue_job WHERE id >= %s AND tenant_id = 'std'"
            " AND state <> 'succeeded'",
            [ids["first"]],
        )[0][0]
    finally:
        stop(procs)
    if left == 0:
        print("  (note: std's backlog ran dry inside the window; enlarge --weights-backlog)")
    return counts.get("gold", 0) / max(1, counts.get("std", 0))


def row_weights(cfg: argparse.Namespace, target: Target) -> list[Row]:
    shapes = [(2, 10), (4, 5), (8, 3), (16, 1)]
    variants = {f"{p}x{c}": (lambda p=p, c=c: weights_jq(target, cfg, p, c)) for p, c in shapes}
    got = interleaved(cfg.repeats, variants)
    return [
        Row(
            "weights",
            f"TENANT_WEIGHTS 3:1, deep backlogs of 20 ms jobs, {name}: gold/std",
            values,
            "ratio",
            note="goal 3 +-5%" if name == "2x10" else "",
        )
        for name, values in got.items()
    ]


CKEY_SLEEP_S = 0.05


def ckey_jq(target: Target, cfg: argparse.Namespace) -> float:
    target.fresh_jq()
    env = jq_env(target)
    procs = [jq_workers(env, 2)]
    try:
        jq_ready(target, 2)
        jq_warm(target, env, 2)
        payload = {"path": os.devnull, "sleep_s": CKEY_SLEEP_S}
        group = {"type": SLEEPER, "payload": payload, "n": cfg.ckey_jobs, "key": "k", "limit": 2}
        ids = jq_client(env, "bulk", {"groups": [group]})
        jq_wait_done(target, ids["first"], ids["last"], 600)
    finally:
        stop(procs)
    [(busy, span)] = rows(
        target.jq_url,
        "SELECT extract(epoch FROM sum(finished_at - started_at))::float8,"
        " extract(epoch FROM max(finished_at) - min(started_at))::float8"
        " FROM jobqueue_job WHERE id BETWEEN %s AND %s",
        [ids["first"], ids["last"]],
    )
    return busy / (2 * span)


def ckey_pgq(target: Target, cfg: argparse.Namespace) -> float:
    target.fresh_pgq()
    procs = pgq_workers(target, 2)
    try:
        warm = pgq_ready(target, 2)
        pgq_enqueue(target, "keyed", [b"{}"] * cfg.ckey_jobs)
        pgq_wait_done(target, warm, cfg.ckey_jobs, 600)
    finally:
        stop(procs)
    [(busy, span)] = rows(
        target.pgq_url,
        "SELECT extract(epoch FROM sum(s.created - p.created))::float8,"
        " extract(epoch FROM max(s.created) - min(p.created))::float8"
        " FROM pgqueuer_log p JOIN pgqueuer_log s USING (job_id)"
        " WHERE p.status = 'picked' AND s.status = 'successful' AND job_id > %s",
        [warm],
    )
    return busy / (2 * span)


def row_ckey(cfg: argparse.Namespace, target: Target) -> list[Row]:
    got = interleaved(
        cfg.repeats,
        {"jobqueue": lambda: ckey_jq(target, cfg), "pgqueuer": lambda: ckey_pgq(target, cfg)},
    )
    return [
        Row(
            "ckey",
            f"key limit 2, {cfg.ckey_jobs} jobs of 50 ms, 2 processes: limit in use",
            got["jobqueue"],
            "fraction",
            pgq=got["pgqueuer"],
            note="pgqueuer: entrypoint concurrency_limit=2",
        )
    ]


def pickup_jq(target: Target, cfg: argparse.Namespace) -> tuple[float, float]:
    target.fresh_jq()
    env = jq_env(target)
    stampfile = LOGS / f"pickup-jq-{time.monotonic_ns()}.txt"
    procs = [jq_workers(env)]
    try:
        jq_ready(target, 1)
        jq_warm(target, env, 1)
        spec = {"n": cfg.pickup_jobs, "gap_s": 0.02, "path": str(stampfile)}
        sent = jq_client(env, "trickle", spec)["sent"]
        wait_for(
            "the trickle's jobs started",
            lambda: len(stampfile.read_text().splitlines()) >= cfg.pickup_jobs,
            120,
            0.1,
        )
    finally:
        stop(procs)
    delays = _delays(stampfile, sent)
    return percentile(delays, 50), percentile(delays, 99)


def pickup_pgq(target: Target, cfg: argparse.Namespace) -> tuple[float, float]:
    target.fresh_pgq()
    stampfile = LOGS / f"pickup-pgq-{time.monotonic_ns()}.txt"
    procs = pgq_workers(target, 1, stamp=stampfile)
    try:
        pgq_ready(target, 1)
        # One connection for the whole trickle, as jobqueue's enqueuer keeps Django's.
        sent = asyncio.run(_trickle_one_connection(target.pgq_url, cfg.pickup_jobs))
        wait_for(
            "pgqueuer's trickle started",
            lambda: (
                stampfile.exists() and len(stampfile.read_text().splitlines()) >= cfg.pickup_jobs
            ),
            120,
            0.1,
        )
    finally:
        stop(procs)
    delays = _delays(stampfile, sent)
    return percentile(delays, 50), percentile(delays, 99)


async def _trickle_one_connection(url: str, n: int) -> dict[str, float]:
    import asyncpg
    from pgqueuer.db import AsyncpgDriver
    from pgqueuer.queries import Queries

    conn = await asyncpg.connect(url)
    try:
        queries = Queries(AsyncpgDriver(conn))
        sent: dict[str, float] = {}
        for i in range(n):
            key = f"p{i}"
            sent[key] = time.time()
            await queries.enqueue("stamp", key.encode())
            await asyncio.sleep(0.02)
        return sent
    finally:
        await conn.close()


def row_pickup(cfg: argparse.Namespace, target: Target) -> list[Row]:
    got = interleaved(
        cfg.repeats,
        {"jobqueue": lambda: pickup_jq(target, cfg), "pgqueuer": lambda: pickup_pgq(target, cfg)},
    )
    label = f"pickup, {cfg.pickup_jobs} jobs 20 ms apart, one idle worker process"
    return [
        Row(
            "pickup",
            f"{label}: p50 (ms)",
            [v[0] for v in got["jobqueue"]],
            "ms",
            pgq=[v[0] for v in got["pgqueuer"]],
        ),
        Row(
            "pickup",
            f"{label}: p99 (ms)",
            [v[1] for v in got["jobqueue"]],
            "ms",
            pgq=[v[1] for v in got["pgqueuer"]],
        ),
    ]


def row_drain(cfg: argparse.Namespace, target: Target) -> list[Row]:
    import core  # bench/core.py: the raw-SQL limit (its URL is BENCH_DATABASE_URL's, set below)

    n = cfg.jobs

    def limit() -> float:
        target.fresh_jq()
        return core.raw_limit(n, inserts=0)["drain"]

    got = interleaved(
        cfg.repeats,
        {
            "jq 1x": lambda: drain_jq(target, n),
            "pgq 1": lambda: drain_pgq(target, n, 1),
            "jq 2x": lambda: drain_jq(target, n, processes=2),
            "pgq 2": lambda: drain_pgq(target, n, 2),
            "jq 2x10": lambda: drain_jq(target, n, processes=2, concurrency=10),
            "limit": limit,
        },
    )

    def note(name: str, pgq: str) -> str:
        return (
            f"{ratio(got[name], got[pgq]):.2f}x pgqueuer,"
            f" {ratio(got[name], got['limit']):.2f} of the limit"
        )

    return [
        Row("drain", f"drain {n:,}, 1 process, defaults", got["jq 1x"], "jobs/s",
            pgq=got["pgq 1"], note=note("jq 1x", "pgq 1")),
        Row("drain", f"drain {n:,}, 2 processes, defaults", got["jq 2x"], "jobs/s",
            pgq=got["pgq 2"], note=note("jq 2x", "pgq 2")),
        Row("drain", f"drain {n:,}, 2 processes x 10", got["jq 2x10"], "jobs/s",
            pgq=got["pgq 2"], note=note("jq 2x10", "pgq 2")),
        Row("drain", "the limit: raw SQL claim 100 + ack 100, one connection", got["limit"],
            "jobs/s"),
    ]  # fmt: skip


def peer_method(target: Target, n: int) -> tuple[float, float, float]:
    """Drain n jobs through pgqueuer the way ``bench/peers/pgq.py`` does (enqueue, then one
    ``pgq run --mode drain``, timed by wall clock from its start to its exit); return (that
    jobs/s, the same run's span jobs/s as this bench reads it, the consumer's CPU ms)."""
    import resource

    sys.path.insert(0, str(HERE / "peers"))
    import pgq  # bench/peers/pgq.py, the peers bench's pgqueuer driver

    target.fresh_pgq()
    os.environ["PEERS_DATABASE_URL"] = target.pgq_url
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = pgq.drain(n, 1)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    done, span = pgq_span(target, 0)
    return wall, done / span, 1000 * cpu


def row_method(cfg: argparse.Namespace, target: Target) -> list[Row]:
    n = cfg.jobs
    got = interleaved(
        cfg.repeats,
        {
            "peers bench": lambda: peer_method(target, n),
            "this bench": lambda: drain_pgq(target, n, 1),
        },
    )
    peers = got["peers bench"]
    cpu = statistics.median(v[2] for v in peers)
    return [
        Row(
            "method",
            f"pgqueuer, 1 process, {n:,} jobs, as bench/peers/pgq.py: wall (jobs/s)",
            [],
            "jobs/s",
            pgq=[v[0] for v in peers],
            note=f"its consumer's CPU {cpu:,.0f} ms, start and exit included",
        ),
        Row(
            "method", "same runs, first pick to last done", [], "jobs/s", pgq=[v[1] for v in peers]
        ),
        Row("method", "long-running, as the other rows", [], "jobs/s", pgq=got["this bench"]),
    ]


# -- the private cluster: idle cost and CPU per job --------------------------------------------


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
    _fresh(target.pgq_url + "_tpl", template=None)
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


def idle_cost(private: Cluster, system: str, n: int, window_s: float, base_cpu: float) -> tuple:
    """Return (% of a core per idle process, cores per 1,000, statements/s per process)."""
    target = private.target
    if system == "pgqueuer":
        target.fresh_pgq()
        procs = pgq_workers(target, n)
        admin = _admin(target.jq_url)

        def ready() -> bool:
            return (
                rows(
                    admin,
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = %s",
                    [_name(target.pgq_url)],
                )[0][0]
                >= n
            )

    else:
        target.fresh_jq()
        via = private.pooled.app_url if system == "pooled" else None
        settings = {"POOLED_DATABASES": {"default": {}}} if system == "pooled" else {}
        procs = [jq_workers(jq_env(target, settings, via=via), n)]

        def ready() -> bool:
            return rows(target.jq_url, "SELECT count(*) FROM jobqueue_worker")[0][0] >= n

    try:
        wait_for(f"{n} idle {system} processes up", ready, 600, 0.5)
        time.sleep(5.0)  # settled: starts done, first polls past
        data = private.cluster.datadir
        db = _name(target.pgq_url if system == "pgqueuer" else target.jq_url)
        rows(target.jq_url, "SELECT pg_stat_statements_reset()")
        statements0, _ = statement_totals(target.jq_url, db)
        cpu0, t0 = server_cpu_s(data), time.monotonic()
        time.sleep(window_s)
        cpu1, t1 = server_cpu_s(data), time.monotonic()
        statements1, _ = statement_totals(target.jq_url, db)
        top = statement_top(target.jq_url, db)
    finally:
        stop(procs)
    for calls, ms, query in top:
        rate = calls / (t1 - t0) / n
        print(f"      {rate:6.2f}/s per process, {ms:6.3f} ms each: {query}")
    per_s = (cpu1 - cpu0) / (t1 - t0) - base_cpu
    return 100 * per_s / n, 1000 * per_s / n, (statements1 - statements0) / (t1 - t0) / n


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


def row_idle(cfg: argparse.Namespace, private: Cluster) -> list[Row]:
    data = private.cluster.datadir
    c0, t0 = server_cpu_s(data), time.monotonic()
    time.sleep(cfg.idle_seconds)
    base = (server_cpu_s(data) - c0) / (time.monotonic() - t0)
    print(f"  the cluster alone: {100 * base:.2f}% of a core")
    n, w = cfg.idle_processes, cfg.idle_seconds
    variants = {
        "direct": lambda: idle_cost(private, "direct", n, w, base),
        "pgqueuer": lambda: idle_cost(private, "pgqueuer", n, w, base),
    }
    if private.pooled is not None:
        variants["pooled"] = lambda: idle_cost(private, "pooled", n, w, base)
    got = interleaved(cfg.repeats, variants)
    out = []
    for name, label in (("direct", "direct (LISTEN)"), ("pooled", "through PgBouncer (polling)")):
        if name not in got:
            continue
        out.append(
            Row(
                "idle",
                f"{n} idle processes, {label}: server CPU per process (% of a core)",
                [v[0] for v in got[name]],
                "%core",
                pgq=[v[0] for v in got["pgqueuer"]],
                note=f"{statistics.median(v[1] for v in got[name]):.2f} cores per 1,000;"
                f" {statistics.median(v[2] for v in got[name]):.2f} statements/s per process",
            )
        )
    return out


def cpu_jq(private: Cluster, n: int, tenants: int) -> tuple[float, float]:
    """Return (server CPU ms per job, statement ms per job) of n delayed no-op jobs drained by
    one process of 10 slots."""
    target = private.target
    target.fresh_jq()
    env = jq_env(target)
    procs = [jq_workers(env, 1, 10)]
    try:
        jq_ready(target, 1)
        jq_warm(target, env, 1)
        data = private.cluster.datadir
        group = {"type": NOOP, "n": n, "tenants": tenants, "delay": 2}
        ids = jq_client(env, "bulk", {"groups": [group]})
        cpu0 = server_cpu_s(data)
        s0 = statement_totals(target.jq_url, _name(target.jq_url))[1]
        jq_wait_done(target, ids["first"], ids["last"], 600)
        cpu1 = server_cpu_s(data)
        s1 = statement_totals(target.jq_url, _name(target.jq_url))[1]
    finally:
        stop(procs)
    return 1000 * (cpu1 - cpu0) / n, (s1 - s0) / n


def cpu_pgq(private: Cluster, n: int) -> tuple[float, float]:
    target = private.target
    target.fresh_pgq()
    procs = pgq_workers(target, 1)
    try:
        warm = pgq_ready(target, 1)
        data = private.cluster.datadir
        pgq_enqueue(target, "noop", [b"{}"] * n, after_s=2.0)
        cpu0 = server_cpu_s(data)
        s0 = statement_totals(target.jq_url, _name(target.pgq_url))[1]
        pgq_wait_done(target, warm, n, 600)
        cpu1 = server_cpu_s(data)
        s1 = statement_totals(target.jq_url, _name(target.pgq_url))[1]
    finally:
        stop(procs)
    return 1000 * (cpu1 - cpu0) / n, (s1 - s0) / n


def row_cpu(cfg: argparse.Namespace, private: Cluster) -> list[Row]:
    n = cfg.jobs
    got = interleaved(
        cfg.repeats,
        {
            "100 tenants": lambda: cpu_jq(private, n, 100),
            "1 tenant": lambda: cpu_jq(private, n, 0),
            "pgqueuer": lambda: cpu_pgq(private, n),
        },
    )
    pgq = [v[0] for v in got["pgqueuer"]]
    return [
        Row(
            "cpu",
            f"database CPU per job, {n:,} no-op jobs, 1 process x 10, {name} (ms)",
            [v[0] for v in got[name]],
            "ms",
            pgq=pgq,
            note=f"statements {statistics.median(v[1] for v in got[name]):.3f} ms/job"
            f" (pgqueuer {statistics.median(v[1] for v in got['pgqueuer']):.3f})",
        )
        for name in ("100 tenants", "1 tenant")
    ]


# -- main -------------------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(ROWS), help=f"rows: {','.join(ROWS)}")
    parser.add_argument("--quick", action="store_true", help="smaller runs, 1 repeat")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--jobs", type=int, default=None, help="drain size (5,000)")
    parser.add_argument("--idle-processes", type=int, default=None, help="40 (quick: 8)")
    cfg = parser.parse_args()
    cfg.only = [r.strip() for r in cfg.only.split(",") if r.strip()]
    unknown = sorted(set(cfg.only) - set(ROWS))
    if unknown:
        parser.error(f"--only: unknown row(s) {', '.join(unknown)}; rows: {', '.join(ROWS)}")
    q = cfg.quick
    cfg.repeats = cfg.repeats or (1 if q else 3)
    cfg.jobs = cfg.jobs or (2000 if q else 5000)
    cfg.tenants = [100, 1000, 10000]
    cfg.hot_backlog = 1000
    cfg.weights_backlog = 4000 if q else 12000
    cfg.weights_seconds = 4.0 if q else 10.0
    cfg.ckey_jobs = 60 if q else 200
    cfg.pickup_jobs = 100 if q else 200
    cfg.idle_processes = cfg.idle_processes or (8 if q else 40)
    cfg.idle_seconds = 10.0 if q else 30.0
    return cfg


def main() -> None:
    cfg = parse_args()
    os.environ.setdefault("BENCH_DATABASE_URL", URL)  # bench/core.py's raw limit runs here
    print(
        f"shapes: rows {','.join(cfg.only)}; {cfg.repeats} repeat(s); load average"
        f" {' '.join(f'{x:.1f}' for x in os.getloadavg())}; logs in {LOGS}",
        flush=True,
    )
    shared = Target(jq_url=URL, pgq_url=URL + "_pgq")
    results: list[Row] = []
    shared_rows = [r for r in cfg.only if r not in ("idle", "cpu")]
    try:
        if shared_rows:
            shared.prepare()
            for name in shared_rows:
                print(f"\n{name}", flush=True)
                results += globals()[f"row_{name}"](cfg, shared)
        private_rows = [r for r in cfg.only if r in ("idle", "cpu")]
        if private_rows:
            private = start_private(with_bouncer="idle" in private_rows)
            try:
                for name in private_rows:
                    print(f"\n{name} (private cluster, fsync=off)", flush=True)
                    results += globals()[f"row_{name}"](cfg, private)
            finally:
                stop_private(private)
    finally:
        if shared_rows:
            shared.drop()
    report(cfg, results)


def report(cfg: argparse.Namespace, results: list[Row]) -> None:
    loads = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"\nShapes of load, median (min-max) of {cfg.repeats}; load average now {loads}\n")
    print("| row | figure | jobqueue | pgqueuer | note |\n| --- | --- | ---: | ---: | --- |")
    for r in results:
        print(f"| {r.row} | {r.figure} | {r.med(r.values)} | {r.med(r.pgq)} | {r.note} |")
    out = HERE / "results"
    out.mkdir(exist_ok=True)
    (out / "shapes.json").write_text(
        json.dumps(
            {
                "argv": sys.argv[1:],
                "load": os.getloadavg(),
                "rows": [r.__dict__ for r in results],
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
