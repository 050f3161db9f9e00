"""The retry-storm table: a discrete-time simulation driven by jobqueue's own backoff functions,
breaker transitions and budget arithmetic, then the same storm against real worker processes.

    .venv/bin/python bench/retry_storm.py             # both tables (the real run takes ~4 min)
    .venv/bin/python bench/retry_storm.py --sim-only  # the simulation only (a second)
    .venv/bin/python bench/retry_storm.py --runs budget   # the simulation and one real run

Simulation (no sleeping; time advances from event to event, counted in 0.5 s ticks):

* 300 clients make their first call at random moments within the first second; the dependency is
  down (it refuses every call at once) until 16.5 s;
* then it serves 20 calls per 0.5 s tick; a call over capacity waits and fails after a 1 s
  timeout (an overloaded service makes callers wait before it refuses them);
* a client that failed sleeps the policy's delay for that attempt, from ``jobqueue.backoff``
  (base 0.5 s, cap 30 s) or a fixed 1 s, and calls again, until it succeeds.

Columns: the peak of calls per 0.5 s tick after recovery, total calls (counted until all are done
or until 60 s), calls during the outage (all wasted), and when the last client succeeded (or how
many still fail at 60 s). The breaker rows feed ``jobqueue.store.sqlite.limits._apply`` (the
same transitions as ``record_breaker_outcomes.sql``) with the default ``BREAKER`` settings; the
budget rows spend tokens as ``take_retry_tokens.sql`` does and wait ``budgets.debt_delays``.

Real run: a local HTTP server is the dependency, down (503) for 10 s from the first call, then
serving 20 calls per 0.5 s (503 at once beyond that); 2,000 jobs, ``runworkers --processes 2``; the
database is BENCH_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/jq_brk_bench),
recreated for each row.
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

from _common import ROOT, bench_env, recreate_database

URL = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/jq_brk_bench")
ENV = bench_env(URL)

import django  # noqa: E402  (after bench_env points Django at the settings)

django.setup()

from jobqueue import backoff  # noqa: E402
from jobqueue.limits.budgets import debt_delays  # noqa: E402
from jobqueue.settings.conf import Breaker, RetryBudgetSettings  # noqa: E402
from jobqueue.store.interface import BreakerOutcomes  # noqa: E402
from jobqueue.store.sqlite.limits import _apply  # noqa: E402

TICK_S = 0.5
#: Where the real run's worker processes write their output.
LOG_PATH = os.environ.get("BENCH_LOG", "/tmp/retry_storm_workers.log")
REFERENCE = {
    "fixed 1 s": "156 / 6,154 / 30.5 s",
    "exponential, no jitter": "156 / 2,040 / 260 failing at 60 s",
    "full jitter": "44 / 1,654 / 27.5 s",
    "equal jitter": "60 / 1,598 / 29.5 s",
    "decorrelated jitter": "53 / 1,797 / 28.5 s",
}
POLICY_OF = {
    "fixed 1 s": None,
    "exponential, no jitter": "none",
    "full jitter": "full",
    "equal jitter": "equal",
    "decorrelated jitter": "decorrelated",
}


@dataclass(frozen=True)
class Storm:
    """The simulated storm. Seconds throughout."""

    clients: int = 300
    spread_s: float = 1.0
    outage_s: float = 16.5
    capacity_per_tick: int = 20
    overload_timeout_s: float = 1.0
    base_s: float = 0.5
    cap_s: float = 30.0
    horizon_s: float = 60.0
    seed: int = 3


@dataclass
class Row:
    """One line of a table."""

    name: str
    calls: dict[int, int] = field(default_factory=dict)
    total: int = 0
    during_outage: int = 0
    done: int = 0
    last_success_s: float = 0.0
    clients: int = 0
    horizon_s: float = 60.0
    recovery_s: float = 0.0

    def peak(self) -> int:
        first = int(self.recovery_s / TICK_S + 1e-9)
        return max([n for tick, n in self.calls.items() if tick >= first] or [0])

    def finished(self) -> str:
        if self.done == self.clients:
            return f"{self.last_success_s:.1f} s"
        return f"{self.clients - self.done} failing at {self.horizon_s:.0f} s"

    def line(self, reference: str = "") -> str:
        return (
            f"| {self.name} | {self.peak()} | {self.total:,} | {self.during_outage:,} "
            f"| {self.finished()} |" + (f" {reference} |" if reference else "")
        )


class SimBreaker:
    """One dependency's breaker, moved by jobqueue's own transition function."""

    def __init__(self, conf: Breaker, origin: datetime, probe_s: float = 60.0) -> None:
        self.conf, self.origin, self.probe_s = conf, origin, probe_s
        self.row = SimpleNamespace(
            state="closed",
            window_started_at=origin,
            failures=0,
            successes=0,
            open_until=None,
            cooldown_s=conf.cooldown_seconds,
            probe_job_id=None,
            probe_until=None,
            opened_count=0,
            last_opened_at=None,
            reason="",
            updated_at=origin,
        )

    def at(self, t: float) -> datetime:
        return self.origin + timedelta(seconds=t)

    def gate(self, t: float, client: int, rng: random.Random) -> float | None:
        """Return None to call now, else the time to come back (as BreakerGate decides)."""
        row, now = self.row, self.at(t)
        if row.state == "closed":
            return None
        # claim_probe.sql's condition: open past its cool-down, or a probe that lapsed.
        if (row.state == "open" and row.open_until <= now) or (
            row.state == "half_open" and row.probe_until <= now
        ):
            row.state, row.probe_job_id = "half_open", client
            row.probe_until = now + timedelta(seconds=self.probe_s)
            return None
        start = max(row.open_until, now) if row.state == "open" else now
        back = start + timedelta(seconds=rng.uniform(0, self.conf.cooldown_seconds))
        return (back - self.origin).total_seconds()

    def record(self, t: float, client: int, ok: bool) -> None:
        probe = client if self.row.probe_job_id == client else None
        outcome = BreakerOutcomes(
            name="dependency",
            successes=int(ok),
            failures=int(not ok),
            probe_job_id=probe,
            probe_result=("ok" if ok else "failed") if probe is not None else None,
        )
        _apply(self.row, outcome, self.conf, self.at(t))


class SimBudget:
    """One queue's retry bucket, spent and refilled as take/credit_retry_tokens.sql do."""

    def __init__(self, conf: RetryBudgetSettings) -> None:
        self.conf, self.tokens, self.updated = conf, conf.capacity, 0.0

    def _refill(self, t: float) -> None:
        elapsed = max(t - self.updated, 0.0)
        self.tokens = min(self.conf.capacity, self.tokens + self.conf.floor_per_second * elapsed)
        self.updated = max(self.updated, t)

    def delay(self, t: float) -> float:
        self._refill(t)
        self.tokens -= 1
        return debt_delays(1, self.tokens, self.conf.floor_per_second)[0]

    def credit(self, t: float) -> None:
        self._refill(t)
        self.tokens = min(self.conf.capacity, self.tokens + self.conf.ratio)


def simulate(
    name: str,
    policy: str | None,
    storm: Storm,
    breaker: Breaker | None = None,
    budget: RetryBudgetSettings | None = None,
    horizon_s: float | None = None,
) -> Row:
    """Run one storm; ``policy`` is a ``jobqueue.backoff`` policy name, or None for fixed 1 s."""
    rng = random.Random(storm.seed)
    horizon = horizon_s or storm.horizon_s
    row = Row(name=name, clients=storm.clients, horizon_s=horizon, recovery_s=storm.outage_s)
    sim_breaker = SimBreaker(breaker, datetime(2030, 1, 1, tzinfo=UTC)) if breaker else None
    sim_budget = SimBudget(budget) if budget else None
    served: dict[int, int] = {}
    seq = 0
    # (time, seq, kind, client, attempt): kind "call", or "failed" when a failure is known.
    events: list[tuple[float, int, str, int, int]] = []
    for client in range(storm.clients):
        seq += 1
        events.append((rng.uniform(0, storm.spread_s), seq, "call", client, 1))
    heapq.heapify(events)
    while events:
        t, _, kind, client, attempt = heapq.heappop(events)
        if t > horizon:
            break
        if kind == "failed":
            if sim_breaker:
                sim_breaker.record(t, client, ok=False)
            if policy is None:
                wait = 1.0
            else:
                wait = backoff.POLICIES[policy](attempt, storm.base_s, storm.cap_s, rng)
            if sim_budget:
                wait = max(wait, sim_budget.delay(t))
            seq += 1
            heapq.heappush(events, (t + wait, seq, "call", client, attempt + 1))
            continue
        if sim_breaker:
            back = sim_breaker.gate(t, client, rng)
            if back is not None:  # held back: no call, no attempt
                seq += 1
                heapq.heappush(events, (back, seq, "call", client, attempt))
                continue
        tick = int(t / TICK_S + 1e-9)
        row.calls[tick] = row.calls.get(tick, 0) + 1
        row.total += 1
        if t < storm.outage_s:
            row.during_outage += 1
            failed_at = t
        elif served.get(tick, 0) < storm.capacity_per_tick:
            served[tick] = served.get(tick, 0) + 1
            row.done += 1
            row.last_success_s = max(row.last_success_s, tick * TICK_S)
            if sim_breaker:
                sim_breaker.record(t, client, ok=True)
            if sim_budget:
                sim_budget.credit(t)
            continue
        else:
            failed_at = t + storm.overload_timeout_s
        seq += 1
        heapq.heappush(events, (failed_at, seq, "failed", client, attempt))
    return row


def simulation_table(storm: Storm) -> list[str]:
    header = [
        "| policy | peak calls / 0.5 s after recovery | total calls | calls during outage "
        "| done at | reference (peak / total / done) |",
        "|---|---:|---:|---:|---|---|",
    ]
    lines = header + [
        simulate(name, POLICY_OF[name], storm).line(REFERENCE[name]) for name in REFERENCE
    ]
    # The reference's jitter rows finish by 27.5-29.5 s with peaks of 44-60, which a cap of
    # about 6 s gives; its no-jitter row needs a cap of at least 30 s. Show both.
    small_cap = Storm(**{**storm.__dict__, "cap_s": 6.0})
    lines += [
        "",
        "| the jitter rows with cap 6 s | peak | total calls | calls during outage | done at "
        "| reference |",
        "|---|---:|---:|---:|---|---|",
    ] + [
        simulate(name, POLICY_OF[name], small_cap).line(REFERENCE[name])
        for name in list(REFERENCE)[2:]
    ]
    long = 600.0
    lines += [
        "",
        "| full jitter plus | peak calls / 0.5 s after recovery | total calls "
        "| calls during outage | done at |",
        "|---|---:|---:|---:|---|",
        simulate("nothing (as above, to 600 s)", "full", storm, horizon_s=long).line(),
        simulate(
            "breaker (BREAKER defaults)", "full", storm, breaker=Breaker(), horizon_s=long
        ).line(),
        simulate(
            "budget (RETRY_BUDGET defaults)",
            "full",
            storm,
            budget=RetryBudgetSettings(),
            horizon_s=long,
        ).line(),
        simulate(
            "budget, floor 1/s",
            "full",
            storm,
            budget=RetryBudgetSettings(floor_per_second=1.0),
            horizon_s=long,
        ).line(),
        simulate(
            "breaker and budget (defaults)",
            "full",
            storm,
            breaker=Breaker(),
            budget=RetryBudgetSettings(),
            horizon_s=long,
        ).line(),
    ]
    return lines


# -- the real run --------------------------------------------------------------------------


class Dependency:
    """A local HTTP service: 503 while down, then 20 calls per 0.5 s tick (503 beyond)."""

    def __init__(self, down_s: float, capacity_per_tick: int) -> None:
        self.down_s, self.capacity = down_s, capacity_per_tick
        self.lock = threading.Lock()
        self.calls: dict[int, int] = {}
        self.served: dict[int, int] = {}
        self.during_outage = 0
        self.successes = 0
        self.last_success_s = 0.0
        # The storm starts with the first call (worker processes take seconds to start on a
        # busy machine; the outage must not pass before anyone calls).
        self.started: float | None = None
        dependency = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                code = dependency.answer()
                self.send_response(code)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok" if code == 200 else b"no")

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def answer(self) -> int:
        with self.lock:
            if self.started is None:
                self.started = time.monotonic()
            t = time.monotonic() - self.started
            tick = int(t / TICK_S)
            self.calls[tick] = self.calls.get(tick, 0) + 1
            if t < self.down_s:
                self.during_outage += 1
                return 503
            if self.served.get(tick, 0) >= self.capacity:
                return 503
            self.served[tick] = self.served.get(tick, 0) + 1
            self.successes += 1
            self.last_success_s = max(self.last_success_s, t)
            return 200


def real_run(name: str, job_type: str, jobs: int, settings: dict, timeout_s: float) -> str:
    from django.db import connections, transaction

    import jobqueue

    recreate_database(URL, ENV)
    connections.close_all()
    dependency = Dependency(down_s=10.0, capacity_per_tick=20)
    with transaction.atomic():
        for i in range(jobs):
            # max_attempts given here: this process has not imported the handlers' module.
            payload = {"url": f"{dependency.url}?i={i}"}
            jobqueue.enqueue("default", job_type, payload, max_attempts=50)
    env = {**ENV, "JOBQUEUE_SETTINGS": json.dumps(settings), "JOBQUEUE_LOG_LEVEL": "ERROR"}
    cmd = [sys.executable, "-m", "django", "runworkers", "--processes", "2", "--concurrency", "10"]
    log = open(LOG_PATH, "ab")  # the children write to it until they are stopped
    proc = subprocess.Popen(
        cmd, env=env, cwd=ROOT, start_new_session=True, stdout=log, stderr=subprocess.STDOUT
    )
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and dependency.successes < jobs:
            time.sleep(0.2)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
        log.close()
        dependency.server.shutdown()
    row = Row(
        name=name,
        calls=dependency.calls,
        total=sum(dependency.calls.values()),
        during_outage=dependency.during_outage,
        done=dependency.successes,
        last_success_s=dependency.last_success_s,
        clients=jobs,
        horizon_s=timeout_s,
        recovery_s=dependency.down_s,
    )
    return row.line()


REAL_RUNS = ("plain", "breaker", "budget")


def real_table(jobs: int, timeout_s: float, only: tuple[str, ...] = REAL_RUNS) -> list[str]:
    backoff_setting = {"policy": "full", "base_seconds": 0.5, "cap_seconds": 60}
    common = {"POLL_INTERVAL_SECONDS": 0.2, "BACKOFF": backoff_setting}
    lines = [
        "| run (full jitter, base 0.5 s, cap 60 s) | peak calls / 0.5 s after recovery "
        "| total calls | calls during outage | done at |",
        "|---|---:|---:|---:|---|",
    ]
    runs = {
        "plain": ("no breaker, no budget", "bench.storm_jobs.call", {"RETRY_BUDGET": None}),
        "breaker": (
            "breaker (BREAKER defaults)",
            "bench.storm_jobs.call_guarded",
            {"RETRY_BUDGET": None},
        ),
        "budget": ("budget (RETRY_BUDGET defaults)", "bench.storm_jobs.call", {}),
    }
    for name, job_type, extra in (runs[key] for key in only):
        line = real_run(name, job_type, jobs, {**common, **extra}, timeout_s)
        print(line, flush=True)
        lines.append(line)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sim-only", action="store_true", help="skip the real run")
    parser.add_argument("--jobs", type=int, default=2000, help="jobs in the real run")
    parser.add_argument("--timeout", type=float, default=120.0, help="longest real run, s")
    parser.add_argument(
        "--runs",
        default=",".join(REAL_RUNS),
        help=f"real runs to do, comma-separated (default: {','.join(REAL_RUNS)})",
    )
    args = parser.parse_args()
    storm = Storm()
    print(
        f"Simulation: {storm.clients} clients, first calls within {storm.spread_s:g} s, "
        f"outage {storm.outage_s:g} s, then {storm.capacity_per_tick} calls per {TICK_S:g} s "
        f"(over capacity: fails after {storm.overload_timeout_s:g} s); backoff base "
        f"{storm.base_s:g} s, cap {storm.cap_s:g} s; seed {storm.seed}.\n"
    )
    print("\n".join(simulation_table(storm)))
    if not args.sim_only:
        print(
            f"\nReal run: {args.jobs} jobs, runworkers --processes 2 --concurrency 10, "
            "dependency down 10 s then 20 calls per 0.5 s:\n"
        )
        only = tuple(name for name in args.runs.split(",") if name)
        unknown = sorted(set(only) - set(REAL_RUNS))
        if unknown:
            parser.error(f"unknown --runs {', '.join(unknown)} (known: {', '.join(REAL_RUNS)})")
        print("\n".join(real_table(args.jobs, args.timeout, only)))


if __name__ == "__main__":
    main()
