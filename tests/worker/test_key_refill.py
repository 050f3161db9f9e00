"""A full concurrency key refills as soon as a slot of it frees, not at the next poll.

Two workers (``Worker.run`` on threads of this process, each with its own listener, on default
LISTEN and a long poll), a key of limit 2 with a backlog: worker A serves the key's queue and a
heavier queue with its own backlog, so when one of A's keyed runs ends, A's claim for the slot
takes a job of the other queue; worker B serves only the key's queue and sleeps (its last claim
found the key full). The key is refilled only if B is woken when A's ack frees its slot. Usage
is counted from what the runs recorded (how many of the key's runs overlap, integrated over the
time its backlog lasted), never from how long anything took: before the fix the freed slot
stood empty until B's poll, most of a poll interval per run of A.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

import jobqueue
from jobqueue.models import Job
from jobqueue.models import Worker as WorkerRow
from jobqueue.worker.loop import Worker
from tests.conftest import requires_postgres, wait_for
from tests.process.test_fairness import all_finished, intervals, most_at_once, records
from tests.testapp import jobs

pytestmark = [requires_postgres(), pytest.mark.django_db(transaction=True)]

LIMIT = 2


def usage(spans: list[tuple[float, float]], limit: int) -> float:
    """Return the share of ``limit`` slots in use from the first start to the last start.

    Until the last run of the key started, the key had a backlog: every instant a slot stood
    empty then is a slot the claims left unused.
    """
    starts = sorted(s for s, _ in spans)
    begin, end = starts[0], starts[-1]
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    used, running, at = 0.0, 0, begin
    for when, step in events:
        if when > end:
            break
        if when > begin:
            used += min(running, limit) * (when - max(at, begin))
            at = when
        running += step
    used += min(running, limit) * (end - max(at, begin))
    return used / (limit * (end - begin))


@pytest.fixture
def started() -> Iterator[list[tuple[Worker, threading.Thread]]]:
    running: list[tuple[Worker, threading.Thread]] = []
    yield running
    for worker, _ in running:
        worker.stop(force=True)
    for _, thread in running:
        thread.join(30)


def start(started: list, **options) -> Worker:
    worker = Worker(install_signal_handlers=False, grace_s=0, poll_interval_s=5.0, **options)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    started.append((worker, thread))
    return worker


def leased(queue: str) -> int:
    return Job.objects.filter(queue=queue, state="leased").count()


@pytest.mark.parametrize("declared", [True, False], ids=["declared", "enqueue-only"])
def test_a_slot_freed_by_a_busy_worker_is_refilled_by_an_idle_one(
    started, tmp_path, declared, settings
):
    path = tmp_path / "runs.jsonl"
    if declared:
        settings.JOBQUEUE = {**settings.JOBQUEUE, "CONCURRENCY_LIMITS": {"k": LIMIT}}

    def spec(queue: str, key: str | None, sleep_s: float) -> dict:
        limit = {"concurrency_key": key, "concurrency_limit": LIMIT} if key else {}
        payload = {"path": str(path), "key": key, "sleep_s": sleep_s}
        return {"queue": queue, "job_type": jobs.fairness_probe, "payload": payload, **limit}

    # A alone first: it takes two of the key (its limit) and leaves one slot.
    a = start(started, queues=["keyed", "other"], weights=[1, 1000], concurrency=3)
    keyed = jobqueue.enqueue_many([spec("keyed", "k", 1.0) for _ in range(8)])
    wait_for(lambda: leased("keyed") == LIMIT, timeout=60)
    # Then a backlog A prefers (weight 1000 to 1) for the slot each keyed run frees.
    others = jobqueue.enqueue_many([spec("other", None, 0.3) for _ in range(40)])
    wait_for(lambda: a.running_jobs == 3, timeout=60)
    # B: only the key's queue; its first claim finds the key full, then it sleeps.
    b = start(started, queues=["keyed"], concurrency=4)
    wait_for(
        lambda: WorkerRow.objects.filter(worker_id=b.worker_id, listener_up=True).exists(),
        timeout=60,
    )
    wait_for(lambda: all_finished(keyed), timeout=120)
    key_of = {r["id"]: r["key"] for r in records(path)}
    spans = [
        (times[0], times[1]) for (job_id, _, _), times in intervals(path).items() if key_of[job_id]
    ]
    assert len(spans) == len(keyed)
    assert most_at_once(spans) <= LIMIT
    # An ack, a notification and a claim per 1 s run: a few ms (about 0.99 in use), up to
    # a few hundred on a machine loaded many times over its cores (0.65 allows about 0.5 s
    # per refill; 0.7998 was seen in a CI run beside a second one and a 3.10 stage). Waiting
    # for B's poll (5 s) instead left the key idle most of the time (0.4).
    assert usage(spans, LIMIT) >= 0.65, sorted(spans)
    assert Job.objects.filter(id__in=others).exists()
