"""Ordering-key enqueues take no lock (issue 33, item 1).

Each enqueue with an ordering key used to take the key's advisory lock until the caller's
transaction committed, and to row-lock the key's last job till then: two transactions enqueueing
keys in opposite orders deadlocked (one user transaction lost), an autocommit enqueue waited on
any open transaction holding its key, and the key's running job could neither heartbeat nor
finish while an enqueueing transaction stayed open. What these tests expect, written before
running them:

- 8 threads x 30 transactions, each enqueueing 2-4 ordering keys in random order by ``enqueue``
  and ``enqueue_many`` (with dedupe keys unique per transaction and concurrency keys): no
  error, every job committed; drained, each key's jobs run one at a time, and each thread's jobs
  of a key (a sequential producer) in id order.
- Two transactions each holding an enqueue of one key, then enqueueing the other's key, both
  under ``lock_timeout = 100ms``: both enqueues return while both transactions are open.
- An autocommit enqueue of a key that an open transaction has enqueued returns (under
  ``lock_timeout = 100ms``) while that transaction is still open.
- A follower enqueued in an open transaction behind a running job: that job heartbeats and
  finishes while the transaction is open (under ``lock_timeout = 100ms``); after the commit the
  follower is released (the reaper's tick) and runs to ``succeeded``.
"""

from __future__ import annotations

import random
import threading
from collections import defaultdict
from collections.abc import Callable

import pytest
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext

import jobqueue
from jobqueue.consumer import ack, claim, heartbeat
from jobqueue.maintenance.reaper import STRANDED_EVERY_ROUNDS, Reaper
from jobqueue.models import Job
from jobqueue.states import JobState
from jobqueue.store import get_store
from jobqueue.worker.outage import ReapHold
from tests.conftest import requires_postgres
from tests.testapp import jobs

pytestmark = pytest.mark.django_db(databases=["default", "sqlite"], transaction=True)
pg = requires_postgres()

#: Generous guard on a wait that follows measured progress: a join, an event.
GUARD_S = 120.0


def _in_thread(target: Callable[[], object]) -> Callable[[], object]:
    """Run ``target`` on a thread of its own (its own connection); return a join that re-raises."""
    box: dict[str, object] = {}

    def run() -> None:
        try:
            box["value"] = target()
        except BaseException as exc:  # noqa: BLE001 - handed to the joining test
            box["error"] = exc
        finally:
            connections.close_all()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()

    def join() -> object:
        thread.join(GUARD_S)
        assert not thread.is_alive(), "the thread did not finish within the guard"
        if "error" in box:
            raise box["error"]  # type: ignore[misc]
        return box.get("value")

    return join


def _no_waiting() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SET lock_timeout = '100ms'")


def _drain(queue: str) -> list[tuple[int, str]]:
    """Claim and ack every job of ``queue``, a few held at once; return (id, key) in run order.

    Asserts, at each claim, that no ordering key has two jobs held at once.
    """
    rng = random.Random(7)
    held: dict[int, tuple[object, str]] = {}
    started: list[tuple[int, str]] = []
    reaper = Reaper(get_store(), interval_s=1.0, hold=ReapHold(0.0), stopping=threading.Event())
    idle = 0
    while idle < 3:
        got = claim(queue, "drain", 20)
        for c in got:
            key = Job.objects.values_list("ordering_key", flat=True).get(id=c.id)
            assert key not in {k for _, k in held.values()}, f"two jobs of {key} at once"
            held[c.id] = (c.lease_token, key)
            started.append((c.id, key))
        if not got and not held:
            reaper.run_once()
            idle += 1
            continue
        idle = 0
        for job_id in rng.sample(sorted(held), k=max(1, len(held) // 2)):
            token, _ = held.pop(job_id)
            ack(job_id, token)
    return started


@pg
def test_transactions_enqueueing_keys_in_any_order_never_deadlock_and_run_in_order():
    threads, rounds = 8, 30
    keys = [f"acct:{i}" for i in range(6)]
    enqueued: dict[int, list[int]] = defaultdict(list)  # thread -> its job ids, in order

    def producer(n: int) -> Callable[[], object]:
        def run() -> None:
            rng = random.Random(n)
            for r in range(rounds):
                chosen = rng.sample(keys, rng.randint(2, 4))
                with transaction.atomic():
                    Job.objects.filter(id=-1).exists()  # the caller's own business
                    for i, key in enumerate(chosen):
                        if rng.random() < 0.5:
                            enqueued[n].append(
                                jobqueue.enqueue("ord33", jobs.noop, {"n": n}, ordering_key=key)
                            )
                        else:
                            many = [
                                {
                                    "queue": "ord33",
                                    "job_type": jobs.noop,
                                    "ordering_key": key,
                                    "dedupe_key": f"{n}:{r}:{i}:{j}" if j == 0 else None,
                                    "concurrency_key": f"c{j}" if j else None,
                                    "concurrency_limit": 2 if j else None,
                                }
                                for j in range(2)
                            ]
                            enqueued[n].extend(jobqueue.enqueue_many(many))

        return run

    joins = [_in_thread(producer(n)) for n in range(threads)]
    for join in joins:
        join()  # re-raises a deadlock (or any error) of that thread's transactions

    ids = [i for n in range(threads) for i in enqueued[n]]
    assert len(ids) == len(set(ids))
    assert Job.objects.filter(id__in=ids).count() == len(ids)
    started = _drain("ord33")
    assert sorted(i for i, _ in started) == sorted(ids)
    assert Job.objects.filter(id__in=ids).exclude(state=JobState.SUCCEEDED).count() == 0
    position = {job_id: p for p, (job_id, _) in enumerate(started)}
    key_of = dict(started)
    for n in range(threads):
        for key in keys:
            mine = [i for i in enqueued[n] if key_of[i] == key]
            assert sorted(mine, key=position.__getitem__) == sorted(mine), (n, key)


@pg
def test_two_transactions_taking_two_keys_in_opposite_orders_both_commit():
    first_in = threading.Event()
    second_in = threading.Event()

    def other() -> int:
        _no_waiting()
        with transaction.atomic():
            jobqueue.enqueue("ord33", jobs.noop, ordering_key="B")
            second_in.set()
            assert first_in.wait(GUARD_S)
            return jobqueue.enqueue("ord33", jobs.noop, ordering_key="A")

    _no_waiting()
    with transaction.atomic():
        jobqueue.enqueue("ord33", jobs.noop, ordering_key="A")
        join = _in_thread(other)
        assert second_in.wait(GUARD_S)
        jobqueue.enqueue("ord33", jobs.noop, ordering_key="B")
        first_in.set()
        join()  # the other transaction enqueued and committed while this one is open
    assert Job.objects.filter(queue="ord33").count() == 4


@pg
def test_an_autocommit_enqueue_returns_while_a_transaction_holding_its_key_is_open():
    holding = threading.Event()
    done = threading.Event()

    def holder() -> None:
        with transaction.atomic():
            jobqueue.enqueue("ord33", jobs.noop, ordering_key="K")
            jobqueue.enqueue_many([{"queue": "ord33", "job_type": jobs.noop, "ordering_key": "K"}])
            holding.set()
            assert done.wait(GUARD_S)

    join = _in_thread(holder)
    assert holding.wait(GUARD_S)
    try:
        _no_waiting()  # on dcccbbd: "canceling statement due to lock timeout"
        job_id = jobqueue.enqueue("ord33", jobs.noop, ordering_key="K")
        many = jobqueue.enqueue_many(
            [{"queue": "ord33", "job_type": jobs.noop, "ordering_key": "K"}] * 2
        )
    finally:
        done.set()
        join()
    assert Job.objects.filter(id__in=[job_id, *many]).count() == 3


@pg
def test_a_follower_whose_key_job_ends_before_its_commit_still_runs():
    tail = jobqueue.enqueue("ord33", jobs.noop, ordering_key="K")
    (claimed,) = claim("ord33", "w", 1)
    enqueued = threading.Event()
    commit = threading.Event()

    def follower() -> int:
        with transaction.atomic():
            job_id = jobqueue.enqueue("ord33", jobs.noop, ordering_key="K")
            enqueued.set()
            assert commit.wait(GUARD_S)
            return job_id

    join = _in_thread(follower)
    assert enqueued.wait(GUARD_S)
    try:
        # The key's running job heartbeats and finishes while the enqueue is uncommitted.
        _no_waiting()
        heartbeat(tail, claimed.lease_token)
        assert ack(tail, claimed.lease_token) == "succeeded"
    finally:
        commit.set()
        follower_id = join()
    assert Job.objects.get(id=follower_id).state == JobState.WAITING  # its release missed it
    started = _drain("ord33")
    assert [i for i, _ in started] == [follower_id]
    assert Job.objects.get(id=follower_id).state == JobState.SUCCEEDED


@pg
def test_the_reaper_leaves_a_follower_whose_key_job_still_runs():
    tail = jobqueue.enqueue("ord33", jobs.noop, ordering_key="K")
    follower = jobqueue.enqueue("ord33", jobs.noop, ordering_key="K")
    assert get_store().release_stranded() == 0
    assert Job.objects.get(id=follower).state == JobState.WAITING
    (claimed,) = claim("ord33", "w", 1)
    assert claimed.id == tail
    ack(tail, claimed.lease_token)
    # Released by the finish itself (the trigger), not by the reaper.
    assert Job.objects.get(id=follower).state == JobState.READY


def test_the_orm_store_releases_a_follower_whose_key_job_ended_unseen():
    # On SQLite writers are serialized, so this cannot happen by itself: the tail is ended
    # behind the store's back (no settling), which is what an unseen end leaves.
    store = get_store("sqlite")
    tail = jobqueue.enqueue("ord33", jobs.noop, ordering_key="K", using="sqlite")
    follower = jobqueue.enqueue("ord33", jobs.noop, ordering_key="K", using="sqlite")
    later = jobqueue.enqueue("ord33", jobs.noop, ordering_key="K", using="sqlite")
    rows = Job.objects.using("sqlite")
    assert store.release_stranded() == 0
    rows.filter(id=tail).update(state=JobState.SUCCEEDED)
    assert store.release_stranded() == 1
    assert rows.get(id=follower).state == JobState.READY
    assert rows.get(id=later).state == JobState.WAITING  # behind the follower, as before
    assert store.release_stranded() == 0


@pg
def test_the_reaper_repairs_stranded_followers_at_its_first_round_then_every_tenth():
    # The repair probes every key with waiting jobs (the reap's costliest statement when idle):
    # every STRANDED_EVERY_ROUNDS rounds, so a host of N processes, each reaping N times less
    # often, repairs as often as one process did.
    reaper = Reaper(get_store(), interval_s=1.0, hold=ReapHold(0.0), stopping=threading.Event())
    with CaptureQueriesContext(connections["default"]) as seen:
        for _ in range(2 * STRANDED_EVERY_ROUNDS + 1):
            reaper.run_once()
    repairs = [q for q in seen.captured_queries if "WITH RECURSIVE keys" in q["sql"]]
    assert len(repairs) == 3  # rounds 1, 11 and 21
