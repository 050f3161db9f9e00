"""When the completer records a full worker's outcomes, and the claim that rides the write.

A worker whose every slot is taken claims only with the write that frees slots
(``store.finish_then_claim``). When that write would free few slots, it is held for more runs
to end, for at most one round trip (the last write's), so one write and one claim carry more;
an idle worker, a worker freeing many slots, and a stopping worker never wait
(docs/decisions.md, "A full worker holds a small write for at most one round trip").

The completer runs here against a stand-in store on a stand-in clock: each write takes
:data:`ROUND_TRIP_S` of that clock, so the hold's bound is known without timing anything.
"""

from __future__ import annotations

import threading
import uuid
from datetime import datetime, timezone
from types import SimpleNamespace

import pytest

from jobqueue.retries import RunOutcome
from jobqueue.store.interface import ClaimedJob, ClaimRequest, FinishedThenClaimed
from jobqueue.worker import completer as completer_module
from jobqueue.worker.completer import Completer
from jobqueue.worker.context import JobContext
from jobqueue.worker.runs import Run, Runs
from jobqueue.worker.wakeups import WakeUps

# datetime.UTC is Python 3.11+; jobqueue supports 3.10.
UTC = timezone.utc

#: How long each write of the stand-in store takes on the stand-in clock, seconds.
ROUND_TRIP_S = 0.005


class Clock:
    """A ``time`` stand-in whose ``monotonic()`` moves only when told to."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


class Store:
    """Records every write: (job ids recorded, jobs the riding claim asked for, or None)."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.writes: list[tuple[list[int], int | None]] = []  # (ids, the claim's freed)
        #: Called inside each write, before its round trip returns.
        self.during_write = None

    def _round_trip(self) -> None:
        if self.during_write is not None:
            self.during_write()
        self.clock.now += ROUND_TRIP_S

    def finish_many(self, outcomes):
        self._round_trip()
        self.writes.append(([o.job_id for o in outcomes], None))
        return {o.job_id: o.state for o in outcomes}

    def finish_then_claim(self, outcomes, request):
        self._round_trip()
        self.writes.append(([o.job_id for o in outcomes], request.max_jobs))
        return FinishedThenClaimed({o.job_id: o.state for o in outcomes}, [])


class Guard:
    def observe(self, runs, job_types=None) -> None:
        pass


def _claim(ending: list[Run]) -> ClaimRequest:
    return ClaimRequest(["q"], "w", len(ending), 30.0)


class Worker:
    """The completer of a worker with ``concurrency`` slots, and its runs."""

    def __init__(self, concurrency: int, clock: Clock) -> None:
        self.clock = clock
        self.store = Store(clock)
        self.runs = Runs()
        self.stopping = threading.Event()
        self.completer = Completer(
            self.store,
            self.runs,
            worker_id="w",
            using="default",
            concurrency=concurrency,
            guard=Guard(),  # type: ignore[arg-type]
            db_lock=threading.Lock(),
            wakeups=WakeUps(),
            stopping=self.stopping,
            stats=dict.fromkeys(("succeeded", "retried", "dead", "cancelled", "lost"), 0),
            on_db_error=lambda exc, doing: None,
        )
        self._next_id = 0

    def start(self, count: int) -> list[int]:
        """Start ``count`` runs; return their job ids."""
        ids = []
        for _ in range(count):
            self._next_id += 1
            token = uuid.uuid4()
            claimed = ClaimedJob(
                id=self._next_id,
                job_type="t",
                payload={},
                attempt=1,
                max_attempts=3,
                timeout_s=60.0,
                lease_token=token,
                lease_until=datetime(2030, 1, 1, tzinfo=UTC),
                queue="q",
                priority=0,
                tenant_id="",
            )
            context = JobContext(
                job_id=self._next_id,
                job_type="t",
                queue="q",
                attempt=1,
                max_attempts=3,
                worker_id="w",
                lease_token=token,
            )
            self.runs.add(Run(claimed, context))
            ids.append(self._next_id)
        return ids

    def end(self, ids: list[int]) -> None:
        """Deliver the outcomes of the runs ``ids`` (as their handler threads do)."""
        for job_id in ids:
            run = self.runs.get(job_id)
            assert run is not None
            token = run.claimed.lease_token
            self.completer.deliver(
                (token, RunOutcome(job_id=job_id, lease_token=token, state="succeeded"))
            )

    def record(self, *, claim: bool = True) -> int:
        return self.completer.record_ready(_claim if claim else None)


@pytest.fixture
def clock(monkeypatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(completer_module, "time", SimpleNamespace(monotonic=clock.monotonic))
    return clock


def _measured(worker: Worker) -> None:
    """Make one write, so the completer knows what a round trip costs (an idle worker's)."""
    [only] = worker.start(1)
    worker.end([only])
    assert worker.record() == 1
    worker.store.writes.clear()


def test_a_full_worker_whose_runs_end_in_two_groups_records_and_claims_them_in_one_write(clock):
    worker = Worker(10, clock)
    _measured(worker)
    ids = worker.start(10)

    worker.end(ids[:3])
    assert worker.record() == 0  # three free slots: held for more
    assert worker.store.writes == []
    clock.now += ROUND_TRIP_S / 2
    worker.end(ids[3:])
    assert worker.record() == 10

    assert worker.store.writes == [(ids, 10)]
    assert len(worker.runs) == 0


def test_a_full_worker_holds_a_small_write_for_one_round_trip_at_most(clock):
    worker = Worker(10, clock)
    _measured(worker)
    ids = worker.start(10)

    worker.end(ids[:2])
    assert worker.record() == 0
    assert worker.completer.closes_at() == clock.now + ROUND_TRIP_S
    clock.now += ROUND_TRIP_S
    assert worker.record() == 2

    assert worker.store.writes == [(ids[:2], 2)]


def test_a_hold_counts_from_the_last_write_not_from_outcomes_that_waited_for_it(clock):
    worker = Worker(10, clock)
    _measured(worker)
    ids = worker.start(10)
    worker.end(ids[:8])
    # Two runs end while the loop writes the first eight (before the round trip returns).
    worker.store.during_write = lambda: worker.end(ids[8:])
    assert worker.record() == 8
    worker.store.during_write = None
    worker.start(8)  # what the claim that rode the write took: the worker is full again

    worker.completer.take_arrived()
    assert worker.completer.closes_at() == clock.now + ROUND_TRIP_S
    assert worker.record() == 0


def test_a_write_that_frees_many_slots_of_a_full_worker_goes_at_once(clock):
    worker = Worker(10, clock)
    _measured(worker)
    ids = worker.start(10)

    worker.end(ids[:8])
    assert worker.record() == 8

    assert worker.store.writes == [(ids[:8], 8)]


def test_half_the_slots_is_not_many_so_two_halves_go_in_one_write(clock):
    # At a half, a burst settled into two half-size round trips, each freeing "many".
    worker = Worker(10, clock)
    _measured(worker)
    ids = worker.start(10)

    worker.end(ids[:5])
    assert worker.record() == 0
    worker.end(ids[5:])
    assert worker.record() == 10

    assert worker.store.writes == [(ids, 10)]


def test_an_idle_worker_records_and_claims_at_once(clock):
    worker = Worker(10, clock)
    _measured(worker)
    ids = worker.start(10)
    worker.end(ids[:9])
    assert worker.record() == 9

    worker.end(ids[9:])  # the last run: nothing else runs, nothing could join it
    worker.completer.take_arrived()
    assert worker.completer.closes_at() == 0.0
    assert worker.record() == 1

    assert worker.store.writes == [(ids[:9], 9), (ids[9:], 1)]


def test_a_stopping_worker_records_at_once(clock):
    worker = Worker(10, clock)
    _measured(worker)
    ids = worker.start(10)
    worker.stopping.set()

    worker.end(ids[:1])
    assert worker.record(claim=False) == 1

    assert worker.store.writes == [(ids[:1], None)]


def test_a_worker_with_free_slots_batches_outcomes_for_the_window_its_claims_unheld(clock):
    worker = Worker(10, clock)
    _measured(worker)
    ids = worker.start(5)

    worker.end(ids[:1])
    assert worker.record() == 0
    assert worker.completer.closes_at() == clock.now + completer_module.OUTCOME_BATCH_WINDOW_S
    clock.now += completer_module.OUTCOME_BATCH_WINDOW_S
    assert worker.record() == 1

    assert worker.store.writes == [(ids[:1], 1)]
