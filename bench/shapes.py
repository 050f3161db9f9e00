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
How each system is started, fed and timed is ``bench/_shapes_drivers.py``; the rows are here.

Rows (``--only``):

* ``tenants``: 5,000 no-op jobs dealt round robin over 100, 1,000 and 10,000 tenants, against
  the same jobs without a tenant (``tenant_id=""``), at ``--processes 2``: drain jobs/s and the
  ratio to one tenant; pgqueuer (no tenants) at 2 processes beside.
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
  CPU; and long-running with an (unused) entrypoint with a concurrency limit registered: why
  pgqueuer figures differ between benches (docs/performance.md).
* ``cpu``: database CPU per job on a private cluster, 5,000 no-op jobs drained by one process
  of 10 slots, over 100 tenants and one tenant; pgqueuer's one process beside. The jobs are
  enqueued 2 s in the future (``delay=``, pgqueuer's ``execute_after``) so that the CPU window
  (enqueue returned -> last done) holds the drain, not the enqueue; its idle second is in it.

Drain rate = jobs / (last finish - first start), both from the database clock: jobqueue's
``max(finished_at) - min(started_at)``; pgqueuer's ``pgqueuer_log`` rows ``successful`` (written
when its consumer flushes its completions) and ``picked`` (its dequeue). The private cluster
(``idle``, ``cpu``) runs with ``fsync=off`` (tests/pgcluster.py); the rest use the server at
``BENCH_DATABASE_URL`` (default ``postgres://postgres@127.0.0.1:5432/jq_shapes``; pgqueuer's
database is the same name + ``_pgq``); ``--private`` runs every row on the private cluster, away
from a shared server's other clients. Needs pgqueuer in this virtualenv
(``.venv/bin/pip install 'pgqueuer[asyncpg]==1.6.0' 'typer<0.20'``) and, for ``idle``,
PgBouncer (``apt-get install pgbouncer``). Prints one table; the figures also land in
``bench/results/shapes.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from bench._clusters import statement_totals  # noqa: E402
from bench._shapes_drivers import (  # noqa: E402
    LOGS,
    NOOP,
    Cluster,
    Target,
    admin_url,
    db_name,
    drain_jq,
    drain_pgq,
    jq_client,
    jq_env,
    jq_ready,
    jq_wait_done,
    jq_warm,
    jq_workers,
    percentile,
    pgq_enqueue,
    pgq_ready,
    pgq_span,
    pgq_wait_done,
    pgq_workers,
    rows,
    server_cpu_s,
    start_private,
    statement_top,
    stop,
    stop_private,
    wait_for,
)

URL = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/jq_shapes")
SLEEPER = "tests.testapp.jobs.record"  # record(path, sleep_s): one line to a file, then sleep
ROWS = ("tenants", "hot", "weights", "ckey", "pickup", "drain", "method", "idle", "cpu")


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
    procs = pgq_workers(target, 2, keyed=True)
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
        core.URL = target.jq_url  # the server the row runs on (a private cluster's, --private)
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
            "limited entrypoint": lambda: drain_pgq(target, n, 1, keyed=True),
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
        Row(
            "method",
            "same, the consumer also registering an entrypoint with concurrency_limit=2 (unused)",
            [],
            "jobs/s",
            pgq=got["limited entrypoint"],
            note="every dequeue takes pgqueuer's capacity-gated statement",
        ),
    ]


# -- the private cluster: idle cost and CPU per job --------------------------------------------


def idle_cost(private: Cluster, system: str, n: int, window_s: float, base_cpu: float) -> tuple:
    """Return (% of a core per idle process, cores per 1,000, statements/s per process)."""
    target = private.target
    if system == "pgqueuer":
        target.fresh_pgq()
        procs = pgq_workers(target, n)
        admin = admin_url(target.jq_url)

        def ready() -> bool:
            return (
                rows(
                    admin,
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = %s",
                    [db_name(target.pgq_url)],
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
        db = db_name(target.pgq_url if system == "pgqueuer" else target.jq_url)
        rows(target.jq_url, "SELECT pg_stat_statements_reset()")
        statements0, _ = statement_totals(target.jq_url, db)
        cpu0, t0 = server_cpu_s(data), time.monotonic()
        time.sleep(window_s)
        cpu1, t1 = server_cpu_s(data), time.monotonic()
        statements1, _ = statement_totals(target.jq_url, db)
        top = statement_top(target.jq_url, db, 14)
    finally:
        stop(procs)
    for calls, ms, query in top:
        rate = calls / (t1 - t0) / n
        print(f"      {rate:6.2f}/s per process, {ms:6.3f} ms each: {query}")
    per_s = (cpu1 - cpu0) / (t1 - t0) - base_cpu
    return 100 * per_s / n, 1000 * per_s / n, (statements1 - statements0) / (t1 - t0) / n


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
        s0 = statement_totals(target.jq_url, db_name(target.jq_url))[1]
        jq_wait_done(target, ids["first"], ids["last"], 600)
        cpu1 = server_cpu_s(data)
        s1 = statement_totals(target.jq_url, db_name(target.jq_url))[1]
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
        s0 = statement_totals(target.jq_url, db_name(target.pgq_url))[1]
        pgq_wait_done(target, warm, n, 600)
        cpu1 = server_cpu_s(data)
        s1 = statement_totals(target.jq_url, db_name(target.pgq_url))[1]
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
    parser.add_argument(
        "--private",
        action="store_true",
        help="run every row on a private cluster (fsync=off), not BENCH_DATABASE_URL's server:"
        " away from other clients of a shared server (its connections, its load)",
    )
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
    results: list[Row] = []
    on_cluster = ("idle", "cpu")
    shared_rows = [] if cfg.private else [r for r in cfg.only if r not in on_cluster]
    private_rows = [r for r in cfg.only if cfg.private or r in on_cluster]
    shared = Target(jq_url=URL, pgq_url=URL + "_pgq")
    try:
        if shared_rows:
            shared.prepare()
            for name in shared_rows:
                print(f"\n{name}", flush=True)
                results += globals()[f"row_{name}"](cfg, shared)
        if private_rows:
            private = start_private(with_bouncer="idle" in private_rows)
            try:
                for name in private_rows:
                    print(f"\n{name} (private cluster, fsync=off)", flush=True)
                    on = private if name in on_cluster else private.target
                    results += globals()[f"row_{name}"](cfg, on)
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
