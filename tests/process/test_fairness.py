"""Fairness with real worker processes: caps hold across processes, ordering keys across crashes.

Each run of ``tests.testapp.jobs.fairness_probe`` appends its start and end (wall clock, one
machine) and, at its start, the number of its tenant's jobs leased in the database. Assertions
are on those records, never on how long anything took.
"""

from __future__ import annotations

import json
import random
import signal
import time
from collections import defaultdict
from pathlib import Path

import pytest

import jobqueue
from jobqueue.models import Job, Worker
from tests.conftest import FAST_WORKER_SETTINGS, requires_postgres, wait_for
from tests.testapp import jobs

pytestmark = [pytest.mark.slow, requires_postgres(), pytest.mark.django_db(transaction=True)]


def records(path: Path) -> list[dict]:
    try:
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except FileNotFoundError:
        return []


def intervals(path: Path) -> dict[tuple[int, int, int], list[float]]:
    """Return ``{(job id, attempt, pid): [start, end?]}`` from the records."""
    runs: dict[tuple[int, int, int], list[float]] = defaultdict(list)
    for r in sorted(records(path), key=lambda r: r["event"] != "start"):
        runs[(r["id"], r["attempt"], r["pid"])].append(r["at"])
    return runs


def most_at_once(spans: list[tuple[float, float]]) -> int:
    """Return the largest number of ``(start, end)`` spans that overlap at one instant."""
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    current = best = 0
    for _, step in events:
        current += step
        best = max(best, current)
    return best


def all_finished(ids: list[int]) -> bool:
    return Job.objects.filter(id__in=ids, state="succeeded").count() == len(ids)


def test_tenant_caps_hold_across_four_worker_processes(workers, tmp_path):
    """4 processes x 4 slots = 16 slots, TENANT_MAX_RUNNING = 2: no tenant ever has more than 2
    jobs leased, by the database's own count read inside each run and by the runs' own spans;
    the slots are shared (more than 2 runs at once overall)."""
    path = tmp_path / "runs.jsonl"
    settings = {**FAST_WORKER_SETTINGS, "TENANT_MAX_RUNNING": 2}
    procs = [
        workers.start("--queues", "fair", "--concurrency", "4", settings=settings) for _ in range(4)
    ]
    # All four are up before the work arrives: on a loaded machine one process can start
    # seconds before the others and drain the queue alone.
    wait_for(lambda: Worker.objects.count() == 4, timeout=120)
    ids = [
        jobqueue.enqueue(
            "fair", jobs.fairness_probe, {"path": str(path), "tenant": t, "sleep_s": 0.05},
            tenant_id=t,
        )
        for t in ["A"] * 40 + ["B"] * 40 + ["C"] * 20
    ]  # fmt: skip
    wait_for(lambda: all_finished(ids), timeout=300)
    for proc in procs:
        proc.send_signal(signal.SIGTERM)
    for proc in procs:
        assert workers.exit_code(proc) == 0

    starts = [r for r in records(path) if r["event"] == "start"]
    assert len(starts) == 100  # each job ran once
    assert max(r["leased"] for r in starts) == 2
    spans = {k: v for k, v in intervals(path).items() if len(v) == 2}
    by_tenant: dict[str, list[tuple[float, float]]] = defaultdict(list)
    tenant_of = {r["id"]: r["tenant"] for r in starts}
    for (job_id, _, _), (start, end) in spans.items():
        by_tenant[tenant_of[job_id]].append((start, end))
    assert {t: most_at_once(s) <= 2 for t, s in by_tenant.items()} == {
        "A": True,
        "B": True,
        "C": True,
    }
    assert most_at_once([s for spans_ in by_tenant.values() for s in spans_]) > 2
    assert len({r["pid"] for r in starts}) > 1


def test_ordering_keys_keep_order_through_retries_and_a_killed_worker(workers, tmp_path):
    """12 keys x 6 jobs, interleaved at random, about 10% failing once, 3 processes, one of
    them SIGKILLed mid-run: every key's jobs succeed in enqueue order and no two runs of one
    key ever overlap."""
    path = tmp_path / "runs.jsonl"
    rng = random.Random(7)
    plan = [f"k{n}" for n in range(12) for _ in range(6)]
    rng.shuffle(plan)
    ids_of: dict[str, list[int]] = defaultdict(list)
    for key in plan:
        job_id = jobqueue.enqueue(
            "ordered",
            jobs.fairness_probe,
            {"path": str(path), "key": key, "sleep_s": 0.03, "fail_first": rng.random() < 0.1},
            ordering_key=key,
        )
        ids_of[key].append(job_id)
    all_ids = [i for ids in ids_of.values() for i in ids]
    procs = [
        workers.start("--queues", "ordered", "--concurrency", "4", settings=FAST_WORKER_SETTINGS)
        for _ in range(3)
    ]
    wait_for(lambda: len(records(path)) >= 40, timeout=60)
    procs[0].send_signal(signal.SIGKILL)
    assert workers.exit_code(procs[0]) == -signal.SIGKILL
    wait_for(lambda: all_finished(all_ids), timeout=120)
    for proc in procs[1:]:
        proc.send_signal(signal.SIGTERM)
        assert workers.exit_code(proc) == 0

    runs = intervals(path)
    killed = procs[0].pid
    # The run whose ack counted is each job's last successful run: a run in the killed process
    # may have finished its work and died before its (batched) ack, and then ran again, as
    # at-least-once delivery allows.
    final: dict[int, float] = {}
    spans: dict[str, list[tuple[float, float]]] = defaultdict(list)
    key_of = {job_id: key for key, ids in ids_of.items() for job_id in ids}
    ends = {(r["id"], r["attempt"], r["pid"]): r for r in records(path) if r["event"] == "end"}
    for (job_id, attempt, pid), times in runs.items():
        if len(times) == 2:
            spans[key_of[job_id]].append((times[0], times[1]))
            if ends[(job_id, attempt, pid)]["ok"]:
                final[job_id] = max(final.get(job_id, times[0]), times[0])
        else:
            # Only the killed process may leave a run without an end.
            assert pid == killed, (job_id, attempt, pid)
    for key, ids in ids_of.items():
        assert sorted(ids, key=lambda job_id: final[job_id]) == ids, key
        assert most_at_once(spans[key]) == 1, key
    assert Job.objects.filter(id__in=all_ids, state="succeeded").count() == 72


def starts_of(path: Path) -> list[dict]:
    return sorted((r for r in records(path) if r["event"] == "start"), key=lambda r: r["at"])


def test_field_case_17_one_tenants_burst_does_not_starve_the_others(workers, tmp_path):
    """FIELD-CASES 17, sized down: 4 slots, TENANT_MAX_RUNNING = 3, 50 ms jobs. A enqueues 300;
    B then enqueues 1; C then 10. A never holds 4 slots; B starts at the first claim after it
    is enqueued (at most one claim's worth of A's jobs, 3, start in between); C's jobs take
    their share of each freed slot instead of queueing behind A's backlog."""
    path = tmp_path / "runs.jsonl"

    def enqueue(tenant: str, n: int) -> list[int]:
        args = {"path": str(path), "tenant": tenant, "sleep_s": 0.05}
        return [
            jobqueue.enqueue("q17", jobs.fairness_probe, args, tenant_id=tenant) for _ in range(n)
        ]

    a = enqueue("A", 300)
    settings = {**FAST_WORKER_SETTINGS, "TENANT_MAX_RUNNING": 3}
    proc = workers.start("--queues", "q17", "--concurrency", "4", settings=settings)
    wait_for(lambda: len(starts_of(path)) >= 20, timeout=60)
    # A alone: exactly its cap of 3 busy slots, never the 4th.
    assert max(r["leased"] for r in starts_of(path)) == 3
    # "Enqueued" is taken when enqueue has returned (committed): on a loaded machine the
    # enqueue itself can take a while, and starts during it are not "after the enqueue".
    b = enqueue("B", 1)
    b_enqueued = time.time()
    wait_for(lambda: any(r["id"] == b[0] for r in starts_of(path)), timeout=60)
    c = enqueue("C", 10)
    c_enqueued = time.time()
    wait_for(lambda: all_finished(a + b + c), timeout=300)
    proc.send_signal(signal.SIGTERM)
    assert workers.exit_code(proc) == 0

    starts = starts_of(path)
    assert all(r["leased"] <= 3 for r in starts)
    b_start = next(r["at"] for r in starts if r["id"] == b[0])
    a_between = [r for r in starts if r["tenant"] == "A" and b_enqueued < r["at"] < b_start]
    assert len(a_between) <= 3, len(a_between)
    c_last = max(r["at"] for r in starts if r["tenant"] == "C")
    a_during_c = [r for r in starts if r["tenant"] == "A" and c_enqueued < r["at"] < c_last]
    # Fewest-running-first shares each freed slot between A and C: C's 10 start while about
    # 10 of A's do (20 would mean C got only a third of the slots).
    assert len(a_during_c) <= 20, len(a_during_c)


def test_field_case_18_priority_holds_across_scheduled_and_retry(workers, tmp_path):
    """FIELD-CASES 18, sized down: one slot, 200 low-priority 20 ms jobs. H (priority 10) starts
    at the next claim after its enqueue; H2 (priority 10, run_at 1 s ahead) at the next claim
    after its run_at; H3 (priority 10) asks for a retry 1 s later and its retry also runs at the
    next claim after it is due. "Next claim" = at most one low job starts in between."""
    path = tmp_path / "runs.jsonl"
    low_args = {"path": str(path), "tenant": "low", "sleep_s": 0.02}
    for _ in range(200):
        jobqueue.enqueue("q18", jobs.fairness_probe, low_args, priority=0)
    proc = workers.start("--queues", "q18", "--concurrency", "1", settings=FAST_WORKER_SETTINGS)
    wait_for(lambda: len(starts_of(path)) >= 10, timeout=60)
    high = {"path": str(path), "tenant": "high", "sleep_s": 0.02}
    # Moments are taken when they are facts: after the enqueue returned (committed), and H2's
    # due time is its run_at (database clock; same machine, same clock as the handlers').
    h = jobqueue.enqueue("q18", jobs.fairness_probe, high, priority=10)
    h_at = time.time()
    h2 = jobqueue.enqueue("q18", jobs.fairness_probe, high, priority=10, delay=1.0)
    h2_due = Job.objects.get(id=h2).run_at.timestamp()
    h3 = jobqueue.enqueue("q18", jobs.fairness_probe, {**high, "retry_first_s": 1.0}, priority=10)
    wait_for(lambda: all_finished([h, h2, h3]), timeout=120)
    proc.send_signal(signal.SIGTERM)
    assert workers.exit_code(proc) == 0

    starts = starts_of(path)
    ends = {(r["id"], r["attempt"]): r["at"] for r in records(path) if r["event"] == "end"}

    def start(job_id: int, attempt: int = 1) -> float:
        return next(r["at"] for r in starts if r["id"] == job_id and r["attempt"] == attempt)

    def lows_between(t0: float, t1: float) -> int:
        return sum(1 for r in starts if r["tenant"] == "low" and t0 < r["at"] < t1)

    assert lows_between(h_at, start(h)) <= 1
    assert lows_between(h2_due, start(h2)) <= 1
    h3_due = Job.objects.get(id=h3).run_at.timestamp()  # the retry's due time (set by the nack)
    assert h3_due >= ends[(h3, 1)] + 1.0
    assert lows_between(h3_due, start(h3, 2)) <= 1
    # Low jobs were still waiting all along: the high ones overtook them.
    assert lows_between(start(h3, 2), float("inf")) > 0


def test_runworkers_serves_weighted_queues_in_proportion(workers):
    """--queues critical:6,default:3,bulk:1 with one slot: each claim takes one job, and the
    order the jobs started in is exactly the weighted-fair sequence."""
    for queue in ("critical", "default", "bulk"):
        for _ in range(12):
            jobqueue.enqueue(queue, jobs.noop)
    result = workers.run(
        "--queues", "critical:6,default:3,bulk:1", "--concurrency", "1", "--burst", timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "queues critical:6,default:3,bulk:1" in result.stderr
    order = list(Job.objects.order_by("started_at", "id").values_list("queue", flat=True))
    assert order[:10] == [
        "critical", "critical", "default", "critical", "critical",
        "default", "critical", "critical", "default", "bulk",
    ]  # fmt: skip
    assert Job.objects.filter(state="succeeded").count() == 36


def test_runworkers_strict_drains_queues_in_order(workers):
    for queue in ("first", "second"):
        for _ in range(5):
            jobqueue.enqueue(queue, jobs.noop)
    result = workers.run(
        "--queues", "second,first", "--strict", "--concurrency", "1", "--burst", timeout=120
    )
    assert result.returncode == 0, result.stderr
    order = list(Job.objects.order_by("started_at", "id").values_list("queue", flat=True))
    assert order == ["second"] * 5 + ["first"] * 5


def test_strict_with_weights_is_refused(workers):
    result = workers.run("--queues", "a:2,b", "--strict", "--burst", timeout=60)
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert (
        "--strict serves queues in the order listed, so weights do not apply: drop --strict "
        "or the :N weights (a:2,b:1)"
    ) in result.stderr
    assert "Traceback" not in result.stderr
