"""Fairness, priorities, queue weights and ordering keys, measured with real worker processes.

    .venv/bin/python bench/fairness.py [--only N ...] [--quick] [--poll 0.05] [--weights-seconds 30]
        [--drain-jobs 20000] [--variants abf --rounds 4]

Recreates the database named by BENCH_DATABASE_URL (default
postgres://postgres@127.0.0.1:5432/jq_fair), runs the scenarios of issue 6, prints each figure
with its goal and PASS/MISS, then a summary table, and drops the database. Workers are always one
``runworkers --processes 2 --concurrency 8 --no-scheduler`` command (a supervisor forking 2 worker
processes of 8 slots: 16 slots), with POLL_INTERVAL_SECONDS = --poll (0.05 s) and a 0.1 s retry
backoff. The server's JIT setting is kept (``--no-jit`` turns it off for the bench database): the
first run of this script found the claim estimated at ~900,000, past jit_above_cost, so every
claim spent 1-3 s compiling; the claim now estimates at a few thousand and runs no JIT, and this
script is how to see that it stays so. The "20 ms job" is
``tests.testapp.jobs.record`` writing a line to /dev/null and sleeping 0.02 s; every time below
is by the database clock unless it says otherwise.

1. Tenants: tenant A has a backlog of 50,000 ready 20 ms jobs (one INSERT); 1 s after the first
   claim, tenants B..K enqueue 20 jobs each with ``jobqueue.enqueue``, spread evenly over 10 s;
   the run is cut 5 s after the last of them. Reports p50/p99 of B..K's wait (started_at -
   created_at; goal p99 < 1 s) and A's completed jobs/s over the same 15 s window beside a run of
   A alone (goal >= 80 % of it). Done without a tenant cap and with TENANT_MAX_RUNNING = 12; each
   is compared with A alone under the same settings.
2. Priority: 1,000 ready priority-0 20 ms jobs; while they run, priority-100 jobs are enqueued
   one at a time (5 samples). Reports each one's wait (started_at - created_at); goal: at most one
   job duration plus one poll interval (20 ms + --poll), and it must overtake ready priority-0
   jobs (else the backlog had drained and the figure means nothing).
3. Queue weights: ``--queues critical:6,default:3,bulk:1``, each queue with more ready 20 ms jobs
   than 16 slots can run in the window; after 1 s of warm-up, counts the jobs each queue finished
   in --weights-seconds. Goal: every queue within +-15 % of its 6:3:1 share, and bulk > 0.
4. Ordering keys: 200 keys x 50 jobs enqueued (``jobqueue.enqueue(..., ordering_key=...)``) in a
   random interleaving, 10 % failing their first attempt (``tests.testapp.jobs.fairness_probe``,
   which appends each run's start and end to a file). From those runs and the rows: every job
   succeeded, each key's runs started in enqueue (id) order, and no two runs of a key overlapped.
5. Claim cost: ``runworkers --burst`` draining 20,000 ready no-op (0 ms) jobs, (a) all tenant "",
   (b) spread over 100 tenants, (c) 100 tenants with TENANT_MAX_RUNNING = 4 (capped claims take
   turns on an advisory lock), (d) the jobs of (a) under concurrency limits: 100 keys of limit
   2 each (issue 18: every claim counts each head's key on the partial index, and claims take
   turns), (e) 100 tenants of which half weigh 3 (TENANT_WEIGHTS), (f) the jobs dealt to 200
   ordering keys (issue 15), each key's jobs enqueued one after another with ``jobqueue.enqueue``
   in one transaction (so a key's followers wait off the claim's path where the checkout does
   that). Reports jobs/s as wall time
   of the command and as the span first claim -> last ack, and each as a fraction of (a).
6. Tenant weights (issue 18): tenants "gold" (TENANT_WEIGHTS 3) and "std" (1), each with more
   ready 20 ms jobs than 16 slots can run in the window; counts the jobs each finished in
   --weights-seconds after 1 s of warm-up. Goal: gold:std = 3:1 +-15 %.
7. A held key (issue 18): one concurrency key at its limit (2 leased) with 0, 1,000 or 10,000
   of its jobs ready ahead of 10 unlimited ones in the same queue; one claim of 10, in a
   transaction rolled back, 21 times. Reports the median claim time (ms, client side) and that
   the claim returned the 10 unlimited jobs (goal: all 10, every time).

``--quick`` shrinks every scenario (smaller backlogs, shorter windows) for a run of ~2 minutes.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from _common import ROOT, bench_env, recreate_database

URL = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/jq_fair")
ENV = bench_env(URL)

SLEEP_JOB = "tests.testapp.jobs.record"  # record(path, sleep_s): one line to /dev/null, then sleep
SLEEP_PAYLOAD = {"path": os.devnull, "sleep_s": 0.02}
JOB_S = 0.02
NOOP_JOB = "tests.testapp.jobs.noop"
PROBE_JOB = "tests.testapp.jobs.fairness_probe"
PROCESSES, SLOTS = 2, 8
WORKDIR = Path(tempfile.mkdtemp(prefix="jq_fair_"))


@dataclass
class Result:
    """One line of the summary: a figure, its goal, what was measured, and the verdict."""

    scenario: str
    figure: str
    goal: str
    value: str
    ok: bool


RESULTS: list[Result] = []


def report(scenario: str, figure: str, goal: str, value: str, ok: bool) -> None:
    RESULTS.append(Result(scenario, figure, goal, value, ok))
    print(f"  {figure:<44} {value:>22}   goal {goal:<22} {'PASS' if ok else 'MISS'}", flush=True)


# -- database -------------------------------------------------------------------------------------


def query(sql: str, params: list | dict | None = None) -> list[tuple]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall() if cursor.description else []


def truncate() -> None:
    # jobqueue_jobparent too: scenario 5's (f) chains each key's jobs, and with the ids restarted
    # a second (f) in one run would meet the first one's edges (duplicate parent edge).
    query("TRUNCATE jobqueue_job, jobqueue_worker, jobqueue_jobparent RESTART IDENTITY")


def db_now():
    """The database clock now (clock_timestamp: not pinned to a transaction's start)."""
    return query("SELECT clock_timestamp()")[0][0]


def insert_ready(
    n: int,
    queue: str,
    job_type: str = SLEEP_JOB,
    payload: dict | None = None,
    *,
    tenant: str = "",
    tenants: int = 0,
    keys: int = 0,
    key_limit: int = 1,
) -> None:
    """Insert ``n`` ready jobs in one statement: setup for a backlog, not measured.

    The rows are what ``enqueue`` writes for a ready job. With ``tenants`` > 0 the jobs are dealt
    round-robin to tenants t000..t{tenants-1} instead of all going to ``tenant``; with ``keys``
    > 0, to concurrency keys k000..k{keys-1} of limit ``key_limit``.
    """
    query(
        "INSERT INTO jobqueue_job (queue, type, payload, priority, tenant_id, state, run_at,"
        " attempts, max_attempts, timeout_s, leased_by, errors, dead_reason, created_at,"
        " concurrency_key, concurrency_limit)"
        " SELECT %(queue)s, %(type)s, %(payload)s::jsonb, 0,"
        " CASE WHEN %(tenants)s = 0 THEN %(tenant)s"
        " ELSE 't' || lpad((g %% %(tenants)s)::text, 3, '0') END,"
        " 'ready', now(), 0, 8, 30, '', '[]', '', now(),"
        " CASE WHEN %(keys)s > 0 THEN 'k' || lpad((g %% %(keys)s)::text, 3, '0') END,"
        " CASE WHEN %(keys)s > 0 THEN %(key_limit)s END"
        " FROM generate_series(1, %(n)s) AS g",
        {
            "keys": keys,
            "key_limit": key_limit,
            "queue": queue,
            "type": job_type,
            "payload": json.dumps(SLEEP_PAYLOAD if payload is None else payload),
            "tenant": tenant,
            "tenants": tenants,
            "n": n,
        },
    )
    # The claim's plan depends on the statistics; a fresh backlog of 50,000 rows has none.
    query("ANALYZE jobqueue_job")


def configure_jit(server_jit: bool) -> None:
    """With ``--no-jit``, turn JIT off for every later connection to the bench database."""
    if not server_jit:
        name = URL.rpartition("/")[2]
        query(f'ALTER DATABASE "{name}" SET jit = off')
        from django.db import connection

        connection.close()  # the setting applies to new sessions


def drop_database() -> None:
    import psycopg
    from django.db import connections

    connections.close_all()
    base, _, name = URL.rpartition("/")
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def wait_until(sql: str, params: list | None = None, timeout: float = 60.0, step=0.01) -> bool:
    """Poll until ``sql`` returns a true first column; False on timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if query(sql, params)[0][0]:
            return True
        time.sleep(step)
    return False


def wait_first_claim() -> None:
    # Process start (Django import, migrations check) takes a second or two on this machine; the
    # scenarios time from the first claim, not from the command.
    if not wait_until("SELECT EXISTS (SELECT 1 FROM jobqueue_job WHERE started_at IS NOT NULL)"):
        raise SystemExit("workers claimed nothing within 60 s")


# -- workers --------------------------------------------------------------------------------------


class Workers:
    """One ``runworkers --processes 2 --concurrency 8`` command, stopped (and killed if need be)
    on exit. It runs in its own process group so the forked workers can be killed with it."""

    def __init__(self, queues: str, settings: dict, *flags: str) -> None:
        self.settings = settings
        self.cmd = [
            sys.executable, "-m", "django", "runworkers", "--queues", queues,
            "--processes", str(PROCESSES), "--concurrency", str(SLOTS), "--no-scheduler", *flags,
        ]  # fmt: skip
        self.log = WORKDIR / f"workers-{time.monotonic_ns()}.log"

    def __enter__(self) -> Workers:
        env = {**ENV, "JOBQUEUE_SETTINGS": json.dumps(self.settings)}
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(
                self.cmd, env=env, cwd=ROOT, stdout=log, stderr=log, start_new_session=True
            )
        return self

    def wait(self, timeout: float) -> int:
        return self.proc.wait(timeout)

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # drain: running 20 ms jobs finish
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        text = self.log.read_text()
        if "Traceback" in text or "ERROR" in text:
            print(f"  (worker log {self.log} shows errors; last lines:)", file=sys.stderr)
            print("\n".join(text.splitlines()[-15:]), file=sys.stderr)


def worker_settings(poll: float, **extra: object) -> dict:
    return {
        "POLL_INTERVAL_SECONDS": poll,
        "BACKOFF": {"policy": "none", "base_seconds": 0.1, "cap_seconds": 0.1},
        **extra,
    }


# -- figures --------------------------------------------------------------------------------------


def percentile(values: list[float], p: float) -> float:
    values = sorted(values)
    index = min(len(values) - 1, max(0, round(p / 100 * (len(values) - 1))))
    return values[index]


def rate_in_window(where: str, t0, t1, params: list | None = None) -> float:
    """Jobs per second that finished (succeeded) in [t0, t1] and match ``where``."""
    [(done, span)] = query(
        "SELECT count(*), extract(epoch FROM %s::timestamptz - %s::timestamptz)"
        " FROM jobqueue_job WHERE state = 'succeeded' AND finished_at BETWEEN %s AND %s"
        f" AND {where}",
        [t1, t0, t0, t1, *(params or [])],
    )
    return done / float(span)


# -- 1. tenants -----------------------------------------------------------------------------------


def enqueue_spread(tenants: list[str], per_tenant: int, span_s: float) -> None:
    """Enqueue ``per_tenant`` jobs for each tenant, round-robin, evenly over ``span_s``."""
    import jobqueue

    total = len(tenants) * per_tenant
    start = time.monotonic()
    for i in range(total):
        time.sleep(max(0.0, start + i * span_s / total - time.monotonic()))
        tenant = tenants[i % len(tenants)]
        jobqueue.enqueue("fair", SLEEP_JOB, SLEEP_PAYLOAD, tenant_id=tenant)


def tenant_run(cfg: argparse.Namespace, settings: dict, with_others: bool) -> dict:
    """One run of scenario 1; returns A's jobs/s in the window and the others' waits (ms)."""
    truncate()
    insert_ready(cfg.backlog, "fair", tenant="A")
    others = [chr(c) for c in range(ord("B"), ord("K") + 1)]
    with Workers("fair", settings):
        wait_first_claim()
        time.sleep(1.0)
        t0 = db_now()
        if with_others:
            enqueue_spread(others, cfg.per_tenant, cfg.spread_s)
        else:
            time.sleep(cfg.spread_s)  # the same window, without the other tenants
        time.sleep(cfg.tail_s)
        t1 = db_now()
    rows = query(
        "SELECT extract(epoch FROM started_at - created_at) FROM jobqueue_job"
        " WHERE tenant_id <> 'A' AND started_at IS NOT NULL"
    )
    [(unstarted,)] = query(
        "SELECT count(*) FROM jobqueue_job WHERE tenant_id <> 'A' AND started_at IS NULL"
    )
    [(a_most,)] = query(
        "SELECT count(*) FROM jobqueue_job WHERE tenant_id = 'A' AND state IN ('ready', 'leased')"
    )
    if a_most == 0:
        print("  warning: A's backlog ran out inside the window; its rate is understated")
    return {
        "a_rate": rate_in_window("tenant_id = 'A'", t0, t1),
        "waits": [float(r[0]) * 1000 for r in rows],
        "unstarted": unstarted,
    }


def scenario_tenants(cfg: argparse.Namespace) -> None:
    print(
        f"\n1. tenants: A has {cfg.backlog:,} ready 20 ms jobs; B..K enqueue {cfg.per_tenant} each"
        f" over {cfg.spread_s:g} s from 1 s after the first claim; window = {cfg.spread_s:g} s"
        f" + {cfg.tail_s:g} s"
    )
    for cap in (None, 12):
        extra = {} if cap is None else {"TENANT_MAX_RUNNING": cap}
        settings = worker_settings(cfg.poll, **extra)
        label = "no cap" if cap is None else f"TENANT_MAX_RUNNING={cap}"
        alone = tenant_run(cfg, settings, with_others=False)
        mixed = tenant_run(cfg, settings, with_others=True)
        waits = mixed["waits"]
        p50, p99 = percentile(waits, 50), percentile(waits, 99)
        print(
            f"  [{label}] A alone {alone['a_rate']:,.0f} jobs/s, A with B..K"
            f" {mixed['a_rate']:,.0f} jobs/s; B..K: {len(waits)} started, {mixed['unstarted']}"
            f" not started, max wait {max(waits):.0f} ms"
        )
        ok_wait = p99 < 1000 and mixed["unstarted"] == 0
        report(
            f"1 {label}",
            "B..K wait p50 / p99 (ms)",
            "p99 < 1000 ms",
            f"{p50:.0f} / {p99:.0f}",
            ok_wait,
        )
        share = mixed["a_rate"] / alone["a_rate"]
        report(
            f"1 {label}",
            "A's jobs/s with B..K / A alone",
            ">= 0.80",
            f"{mixed['a_rate']:,.0f} / {alone['a_rate']:,.0f} = {share:.2f}",
            share >= 0.8,
        )


# -- 2. priority ----------------------------------------------------------------------------------


def scenario_priority(cfg: argparse.Namespace) -> None:
    import jobqueue

    goal_ms = (JOB_S + cfg.poll) * 1000
    print(
        f"\n2. priority: {cfg.low_jobs:,} ready priority-0 20 ms jobs, then {cfg.samples}"
        " priority-100 jobs enqueued one at a time while they run"
    )
    truncate()
    insert_ready(cfg.low_jobs, "prio")
    ids = []
    with Workers("prio", worker_settings(cfg.poll)):
        wait_first_claim()
        time.sleep(0.3)
        for _ in range(cfg.samples):
            job_id = jobqueue.enqueue("prio", SLEEP_JOB, SLEEP_PAYLOAD, priority=100)
            ids.append(job_id)
            wait_until(
                "SELECT started_at IS NOT NULL FROM jobqueue_job WHERE id = %s", [job_id], 10
            )
            time.sleep(0.1)
    rows = query(
        "SELECT extract(epoch FROM h.started_at - h.created_at),"
        " (SELECT count(*) FROM jobqueue_job AS l WHERE l.priority = 0"
        "  AND l.created_at < h.created_at"
        "  AND (l.started_at IS NULL OR l.started_at > h.started_at))"
        " FROM jobqueue_job AS h WHERE h.id = ANY(%s) ORDER BY h.id",
        [ids],
    )
    waits = [float(r[0]) * 1000 for r in rows if r[0] is not None]
    overtook = [r[1] for r in rows]
    print(
        "  waits (ms): " + ", ".join(f"{w:.1f}" for w in waits)
        + "; priority-0 jobs each overtook: " + ", ".join(str(n) for n in overtook)
    )  # fmt: skip
    ok = len(waits) == len(ids) and max(waits) <= goal_ms and min(overtook) > 0
    report(
        "2 priority",
        "priority-100 wait, p50 / max (ms)",
        f"max <= {goal_ms:.0f} ms",
        f"{percentile(waits, 50):.1f} / {max(waits):.1f}",
        ok,
    )


# -- 3. weights -----------------------------------------------------------------------------------


def scenario_weights(cfg: argparse.Namespace) -> None:
    weights = {"critical": 6, "default": 3, "bulk": 1}
    # More than 16 slots can run in the window (800 jobs/s at most), so every queue stays
    # saturated; checked below.
    per_queue = int(SLOTS * PROCESSES / JOB_S * (cfg.weights_seconds + 5))
    spec = ",".join(f"{q}:{w}" for q, w in weights.items())
    print(
        f"\n3. weights: --queues {spec}, {per_queue:,} ready 20 ms jobs per queue, counted over"
        f" {cfg.weights_seconds:g} s after 1 s of warm-up"
    )
    truncate()
    for queue in weights:
        insert_ready(per_queue, queue)
    with Workers(spec, worker_settings(cfg.poll)):
        wait_first_claim()
        time.sleep(1.0)
        t0 = db_now()
        time.sleep(cfg.weights_seconds)
        t1 = db_now()
    done = dict(
        query(
            "SELECT queue, count(*) FROM jobqueue_job WHERE state = 'succeeded'"
            " AND finished_at BETWEEN %s AND %s GROUP BY queue",
            [t0, t1],
        )
    )
    left = dict(query("SELECT queue, count(*) FROM jobqueue_job WHERE state = 'ready' GROUP BY 1"))
    total = sum(done.values())
    ratio = ":".join(f"{10 * done.get(q, 0) / total:.2f}" for q in weights)
    print(
        "  completed: "
        + ", ".join(f"{q} {done.get(q, 0):,} (still ready {left.get(q, 0):,})" for q in weights)
        + f"; {total / (t1 - t0).total_seconds():,.0f} jobs/s in all"
    )
    for queue, weight in weights.items():
        share = done.get(queue, 0) / total / (weight / sum(weights.values()))
        report(
            "3 weights",
            f"{queue} share / its 6:3:1 share",
            "0.85 .. 1.15",
            f"{done.get(queue, 0):,} jobs, {share:.2f}",
            0.85 <= share <= 1.15 and left.get(queue, 0) > 0,
        )
    report(
        "3 weights",
        "ratio critical:default:bulk (sum 10)",
        "6:3:1, bulk > 0",
        ratio,
        done.get("bulk", 0) > 0,
    )


# -- 4. ordering ----------------------------------------------------------------------------------


def enqueue_keyed(keys: int, per_key: int, fail_share: float, path: Path, seed: int) -> set[int]:
    """Enqueue keys x per_key probe jobs in a random interleaving; return the ids set to fail."""
    import jobqueue

    rng = random.Random(seed)
    order = [k for k in range(keys) for _ in range(per_key)]
    rng.shuffle(order)
    failing = set()
    for k in order:
        fail = rng.random() < fail_share
        job_id = jobqueue.enqueue(
            "ordered",
            PROBE_JOB,
            {"path": str(path), "key": f"k{k}", "sleep_s": JOB_S, "fail_first": fail},
            ordering_key=f"k{k}",
        )
        if fail:
            failing.add(job_id)
    return failing


def check_runs(path: Path) -> dict[str, int]:
    """Count, per the runs' own records, order breaks and overlaps within each key."""
    runs: dict[tuple, dict] = defaultdict(dict)
    for line in path.read_text().splitlines():
        r = json.loads(line)
        runs[(r["key"], r["id"], r["attempt"], r["pid"])][r["event"]] = r
    by_key: dict[str, list[tuple[float, float, int]]] = defaultdict(list)
    unfinished = 0
    for (key, job_id, *_), events in runs.items():
        if "end" not in events:
            unfinished += 1
            continue
        by_key[key].append((events["start"]["at"], events["end"]["at"], job_id))
    order_breaks = overlaps = 0
    for spans in by_key.values():
        spans.sort()
        for (_, end, job_id), (next_start, _, next_id) in itertools.pairwise(spans):
            # A retry runs the same id again; any later run of a smaller id breaks the order.
            order_breaks += next_id < job_id
            overlaps += next_start < end
    return {
        "runs": len(runs),
        "unfinished": unfinished,
        "order_breaks": order_breaks,
        "overlaps": overlaps,
    }


def check_rows(failing: set[int]) -> dict[str, float]:
    """From the rows: jobs not succeeded, wrong attempt counts, a key's jobs started out of id
    order, and how often (and by how much) a job's started_at is before its key's previous
    finished_at (both database clock)."""
    [(not_ok,)] = query("SELECT count(*) FROM jobqueue_job WHERE state <> 'succeeded'")
    attempts = query("SELECT id, attempts FROM jobqueue_job")
    wrong = sum(a != (2 if i in failing else 1) for i, a in attempts)
    [(out_of_order, early, early_ms)] = query(
        "SELECT count(*) FILTER (WHERE started_at < prev_start), count(*) FILTER"
        " (WHERE started_at < prev_end), coalesce(1000 * extract(epoch FROM"
        " max(prev_end - started_at) FILTER (WHERE started_at < prev_end)), 0)"
        " FROM (SELECT started_at, lag(started_at) OVER w AS prev_start,"
        " lag(finished_at) OVER w AS prev_end FROM jobqueue_job"
        " WINDOW w AS (PARTITION BY ordering_key ORDER BY id)) AS s"
    )
    return {
        "not_succeeded": not_ok,
        "wrong_attempts": wrong,
        "out_of_order": out_of_order,
        "started_early": early,
        "early_ms": float(early_ms),
    }


def scenario_ordering(cfg: argparse.Namespace) -> None:
    path = WORKDIR / "ordered-runs.jsonl"
    path.unlink(missing_ok=True)
    total = cfg.keys * cfg.per_key
    print(
        f"\n4. ordering: {cfg.keys} keys x {cfg.per_key} jobs (20 ms) in a random interleaving,"
        " 10 % failing their first attempt (retry after 0.1 s); enqueued, then workers started"
    )
    truncate()
    failing = enqueue_keyed(cfg.keys, cfg.per_key, 0.10, path, cfg.seed)
    started = time.monotonic()
    with Workers("ordered", worker_settings(cfg.poll)):
        finished = wait_until(
            "SELECT count(*) = %s FROM jobqueue_job WHERE state IN ('succeeded', 'dead')",
            [total],
            timeout=600,
            step=0.2,
        )
    took = time.monotonic() - started
    runs, rows = check_runs(path), check_rows(failing)
    print(
        f"  {total:,} jobs, {len(failing):,} failed once; {runs['runs']:,} runs in {took:.1f} s"
        f" (workers' start included); drained: {finished}"
    )
    print(
        f"  rows: not succeeded {rows['not_succeeded']}, wrong attempt counts"
        f" {rows['wrong_attempts']}, started out of id order {rows['out_of_order']}; runs: out of"
        f" enqueue order {runs['order_breaks']}, overlapping within a key {runs['overlaps']},"
        f" without an end {runs['unfinished']}"
    )
    # Not counted as a fault: started_at is the claim statement's now(), the time PostgreSQL
    # received it, while the key's previous ack can commit between then and the claim's snapshot
    # (parse, plan); the runs' own start/end records above are the overlap check.
    print(
        f"  rows, for information: started_at before the key's previous finished_at"
        f" {rows['started_early']} times, by at most {rows['early_ms']:.1f} ms"
    )
    bad = rows["not_succeeded"] + rows["wrong_attempts"] + rows["out_of_order"]
    bad += runs["order_breaks"] + runs["overlaps"] + runs["unfinished"]
    report(
        "4 ordering",
        "key order breaks + overlaps + other faults",
        "0",
        f"{bad} of {runs['runs']:,} runs",
        finished and bad == 0,
    )


# -- 5. claim cost --------------------------------------------------------------------------------


def enqueue_ordered(n: int, keys: int) -> None:
    """Enqueue ``n`` no-op jobs for ordering keys o000..o{keys-1}, each key's jobs one after
    another (as an import enqueues an account's jobs), in one transaction with
    ``jobqueue.enqueue`` (as an application would: each key's followers wait behind its last job
    where the checkout measured does that). Dealt round-robin instead, every key's next job
    would be at the front of the claim index and blocked jobs would barely cost a claim."""
    from django.db import transaction

    import jobqueue

    with transaction.atomic():
        for g in range(n):
            jobqueue.enqueue("drain", NOOP_JOB, {}, ordering_key=f"o{g * keys // n:03d}")
    query("ANALYZE jobqueue_job")


def drain(
    cfg: argparse.Namespace,
    tenants: int,
    cap: int | None,
    keys: int = 0,
    weighted: bool = False,
    ordering_keys: int = 0,
) -> tuple[float, float]:
    """Drain --drain-jobs no-op jobs with one ``runworkers --burst``; (wall, span) jobs/s."""
    truncate()
    if ordering_keys:
        enqueue_ordered(cfg.drain_jobs, ordering_keys)
    else:
        insert_ready(cfg.drain_jobs, "drain", NOOP_JOB, {}, tenants=tenants, keys=keys, key_limit=2)
    extra: dict[str, object] = {} if cap is None else {"TENANT_MAX_RUNNING": cap}
    if weighted:
        extra["TENANT_WEIGHTS"] = {f"t{n:03d}": 3 for n in range(0, tenants, 2)}
    start = time.perf_counter()
    with Workers("drain", worker_settings(cfg.poll, **extra), "--burst") as workers:
        workers.wait(600)
    wall = time.perf_counter() - start
    [(done, span)] = query(
        "SELECT count(*) FILTER (WHERE state = 'succeeded'),"
        " extract(epoch FROM max(finished_at) - min(started_at)) FROM jobqueue_job"
    )
    if done != cfg.drain_jobs:
        raise SystemExit(f"drain: only {done} of {cfg.drain_jobs} jobs succeeded")
    return cfg.drain_jobs / wall, cfg.drain_jobs / float(span)


def scenario_claim_cost(cfg: argparse.Namespace) -> None:
    print(
        f"\n5. claim cost: runworkers --burst draining {cfg.drain_jobs:,} no-op (0 ms) jobs;"
        " wall includes process start, span is first claim -> last ack"
    )
    variants = [
        ("(a) all tenant ''", 0, None, 0, False),
        ("(b) 100 tenants", 100, None, 0, False),
        ("(c) 100 tenants, TENANT_MAX_RUNNING=4", 100, 4, 0, False),
        ("(d) 100 concurrency keys, limit 2", 0, None, 100, False),
        ("(e) 100 tenants, half TENANT_WEIGHTS 3", 100, None, 0, True),
        ("(f) 200 ordering keys", 0, None, 0, False),
    ]
    if cfg.variants or cfg.rounds > 1:
        claim_cost_rounds(cfg, [v for v in variants if v[0][1] in (cfg.variants or "abcdef")])
        return
    base = None
    for label, tenants, cap, keys, weighted in variants:
        ordering = 200 if label.startswith("(f)") else 0
        wall, span = drain(cfg, tenants, cap, keys, weighted, ordering)
        base = base or (wall, span)
        report(
            "5 claim cost",
            f"{label} jobs/s wall / span",
            "report (ratio to a)",
            f"{wall:,.0f} / {span:,.0f}",
            True,
        )
        print(f"  {'':<44} ratio to (a): wall {wall / base[0]:.2f}, span {span / base[1]:.2f}")


def claim_cost_rounds(cfg: argparse.Namespace, variants: list[tuple]) -> None:
    """Scenario 5 interleaved: --rounds rounds of the chosen variants, every other round in
    reverse order (a b f, f b a, ...), so a load that drifts during the run weighs on each
    variant alike; each variant's span rate as a ratio to (a) of the same round, then the
    median and range of those ratios. On a machine others load, the sequential form's
    ratios swing with the load between its first and last drain."""
    spans: dict[str, list[float]] = defaultdict(list)
    ratios: dict[str, list[float]] = defaultdict(list)
    for n in range(cfg.rounds):
        ordered = variants if n % 2 == 0 else variants[::-1]
        rates = {}
        for label, tenants, cap, keys, weighted in ordered:
            ordering = 200 if label.startswith("(f)") else 0
            wall, span = drain(cfg, tenants, cap, keys, weighted, ordering)
            rates[label] = span
            load = os.getloadavg()[0]
            print(f"  round {n + 1} {label:<44} {wall:,.0f} / {span:,.0f} jobs/s (load {load:.1f})")
        base = next((r for label, r in rates.items() if label.startswith("(a)")), None)
        for label, span in rates.items():
            spans[label].append(span)
            if base:
                ratios[label].append(span / base)
        if base:
            line = ", ".join(f"{label[:3]} {span / base:.2f}" for label, span in rates.items())
            print(f"  round {n + 1} span ratios to (a): {line}", flush=True)
    for label, _, _, _, _ in variants:
        got = sorted(ratios[label]) or [float("nan")]
        report(
            "5 claim cost",
            f"{label} span ratio to (a), median of {cfg.rounds}",
            "report (range)",
            f"{statistics.median(got):.2f} ({got[0]:.2f}-{got[-1]:.2f})",
            True,
        )


# -- 6. tenant weights ----------------------------------------------------------------------------


def scenario_tenant_weights(cfg: argparse.Namespace) -> None:
    weights = {"gold": 3, "std": 1}
    per_tenant = int(SLOTS * PROCESSES / JOB_S * (cfg.weights_seconds + 5))
    print(
        f"\n6. tenant weights: TENANT_WEIGHTS gold 3, std 1, {per_tenant:,} ready 20 ms jobs each,"
        f" counted over {cfg.weights_seconds:g} s after 1 s of warm-up"
    )
    truncate()
    for tenant in weights:
        insert_ready(per_tenant, "tiers", tenant=tenant)
    settings = worker_settings(cfg.poll, TENANT_WEIGHTS={"gold": 3})
    with Workers("tiers", settings):
        wait_first_claim()
        time.sleep(1.0)
        t0 = db_now()
        time.sleep(cfg.weights_seconds)
        t1 = db_now()
    done = dict(
        query(
            "SELECT tenant_id, count(*) FROM jobqueue_job WHERE state = 'succeeded'"
            " AND finished_at BETWEEN %s AND %s GROUP BY tenant_id",
            [t0, t1],
        )
    )
    left = dict(
        query("SELECT tenant_id, count(*) FROM jobqueue_job WHERE state = 'ready' GROUP BY 1")
    )
    ratio = done.get("gold", 0) / max(done.get("std", 0), 1)
    print(
        "  completed: "
        + ", ".join(f"{t} {done.get(t, 0):,} (still ready {left.get(t, 0):,})" for t in weights)
        + f"; {sum(done.values()) / (t1 - t0).total_seconds():,.0f} jobs/s in all"
    )
    report(
        "6 tenant weights",
        "gold:std completed (weights 3:1)",
        "2.55 .. 3.45",
        f"{ratio:.2f}",
        2.55 <= ratio <= 3.45 and all(left.get(t, 0) > 0 for t in weights),
    )


# -- 7. a held key --------------------------------------------------------------------------------


def scenario_held_key(cfg: argparse.Namespace) -> None:
    from django.db import transaction

    from jobqueue.store.postgres import PostgresStore

    print(
        "\n7. a held key: a key at its limit (2 leased), N of its jobs ahead of 10 unlimited ones"
    )
    store = PostgresStore()
    for ahead in (0, 1_000, 10_000):
        truncate()
        insert_ready(ahead + 2, "held", NOOP_JOB, {}, keys=1, key_limit=2)
        query(
            "UPDATE jobqueue_job SET state = 'leased', lease_until = now() + interval '1 hour',"
            " lease_token = gen_random_uuid(), attempts = 1 WHERE id IN (1, 2)"
        )
        insert_ready(10, "held", NOOP_JOB, {})
        times, got = [], []
        for _ in range(21):
            with transaction.atomic():
                start = time.perf_counter()
                claimed = store.claim(["held"], "bench", 10, 30.0)
                times.append((time.perf_counter() - start) * 1000)
                got.append(sum(1 for j in claimed if j.id > ahead + 2))
                transaction.set_rollback(True)
        report(
            "7 held key",
            f"{ahead:,} held ahead: claim ms (median), unlimited got",
            "10 of 10 every claim",
            f"{percentile(times, 50):.1f} ms, {min(got)}..{max(got)}",
            min(got) == 10,
        )


# -- main -----------------------------------------------------------------------------------------


SCENARIOS = {
    1: scenario_tenants,
    2: scenario_priority,
    3: scenario_weights,
    4: scenario_ordering,
    5: scenario_claim_cost,
    6: scenario_tenant_weights,
    7: scenario_held_key,
}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", type=int, action="append", choices=sorted(SCENARIOS))
    parser.add_argument("--quick", action="store_true", help="smaller, shorter runs")
    parser.add_argument("--poll", type=float, default=0.05, help="POLL_INTERVAL_SECONDS")
    parser.add_argument("--weights-seconds", type=float, default=None, help="scenario 3 window")
    parser.add_argument("--seed", type=int, default=6)
    parser.add_argument("--drain-jobs", type=int, default=None, help="scenario 5's backlog")
    parser.add_argument(
        "--variants", default="", help="scenario 5's variants to run, e.g. abf (default: all)"
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="scenario 5 interleaved: rounds of --variants, alternate rounds reversed",
    )
    parser.add_argument(
        "--no-jit",
        dest="server_jit",
        action="store_false",
        help="turn JIT off for the bench database (default: the server's setting)",
    )
    cfg = parser.parse_args()
    quick = cfg.quick
    # Scenario sizes: the issue's by default, about a fifth with --quick.
    cfg.backlog = 10_000 if quick else 50_000
    cfg.per_tenant = 5 if quick else 20
    cfg.spread_s = 3.0 if quick else 10.0
    cfg.tail_s = 2.0 if quick else 5.0
    cfg.low_jobs = 1_000
    cfg.samples = 3 if quick else 5
    cfg.weights_seconds = cfg.weights_seconds or (8.0 if quick else 30.0)
    cfg.keys, cfg.per_key = (50, 20) if quick else (200, 50)
    cfg.drain_jobs = cfg.drain_jobs or (5_000 if quick else 20_000)
    return cfg


def machine_facts(cfg: argparse.Namespace) -> str:
    import django

    [(pg,)] = query("SHOW server_version")
    [(jit,)] = query("SHOW jit")
    return (
        f"jobqueue fairness benchmark{' (--quick)' if cfg.quick else ''}: runworkers --processes"
        f" {PROCESSES} --concurrency {SLOTS} ({PROCESSES * SLOTS} slots),"
        f" POLL_INTERVAL_SECONDS={cfg.poll:g}, PostgreSQL {pg} (jit={jit}),"
        f" Django {django.get_version()}, Python {sys.version.split()[0]}, {os.cpu_count()} cores"
    )


def print_summary(facts: str) -> None:
    print(f"\n{facts}")
    print(f"{'scenario':<22} {'figure':<44} {'result':>26}  {'goal':<22} verdict")
    for r in RESULTS:
        verdict = "PASS" if r.ok else "MISS"
        print(f"{r.scenario:<22} {r.figure:<44} {r.value:>26}  {r.goal:<22} {verdict}")


def main() -> None:
    cfg = parse_args()
    # A SIGTERM (e.g. from `timeout`) unwinds like Ctrl-C, so the workers are stopped and the
    # database dropped on the way out.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    recreate_database(URL, ENV)
    import django

    django.setup()
    try:
        configure_jit(cfg.server_jit)
        facts = machine_facts(cfg)
        print(facts, flush=True)
        for number in cfg.only or sorted(SCENARIOS):
            SCENARIOS[number](cfg)
        print_summary(facts)
    finally:
        drop_database()
        shutil.rmtree(WORKDIR, ignore_errors=True)


if __name__ == "__main__":
    main()
