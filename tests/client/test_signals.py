"""jobqueue's own signals: who sends each one, when, and with which arguments.

The producer-side ones (enqueued, cancelled) and ``job_started`` are checked in this process; the
outcome signals, which a worker sends after recording an outcome, through a real ``runworkers``
process whose receivers (tests/testapp/tasks.py) write what they saw to a file.
"""

from __future__ import annotations

import json
import logging
import signal
import uuid
from datetime import datetime, timezone

import pytest
from django.db import transaction

import jobqueue
from jobqueue import signals
from jobqueue.models import Job
from jobqueue.retries import RunOutcome
from jobqueue.states import JobState
from jobqueue.store import ClaimedJob, get_store
from jobqueue.worker.context import JobContext
from jobqueue.worker.executor import execute, send_outcome_signal
from tests.conftest import FAST_WORKER_SETTINGS, requires_postgres, wait_for
from tests.testapp import jobs

# datetime.UTC is Python 3.11+; jobqueue supports 3.10.
UTC = timezone.utc

#: The lease token of an outcome built by hand (these tests record none).
TOKEN = uuid.uuid4()


class Received:
    """Record ``(signal name, kwargs)`` for the given signals while in the ``with`` block."""

    def __init__(self, *watched):
        self.watched = watched
        self.calls: list[tuple[str, dict]] = []

    def __enter__(self):
        for s in self.watched:
            s.connect(self.receive, weak=False)
        return self

    def __exit__(self, *exc):
        for s in self.watched:
            s.disconnect(self.receive)

    def receive(self, signal, sender, **kwargs):
        assert sender is Job
        name = next(n for n in signals.__all__ if getattr(signals, n) is signal)
        self.calls.append((name, kwargs))


def context_for(claimed: ClaimedJob, worker_id: str = "w1") -> JobContext:
    return JobContext(
        job_id=claimed.id,
        job_type=claimed.job_type,
        queue=claimed.queue,
        attempt=claimed.attempt,
        max_attempts=claimed.max_attempts,
        worker_id=worker_id,
    )


@pytest.mark.django_db
def test_job_enqueued_is_sent_for_new_rows_only():
    with Received(signals.job_enqueued) as received:
        with transaction.atomic():
            first = jobqueue.enqueue("q", jobs.add, {"a": 1, "b": 2}, dedupe_key="k", priority=5)
            again = jobqueue.enqueue("q", jobs.add, {"a": 1, "b": 2}, dedupe_key="k")
    assert again == first
    assert received.calls == [
        (
            "job_enqueued",
            {
                "job_id": first,
                "job_type": "tests.testapp.jobs.add",
                "queue": "q",
                "priority": 5,
                "run_at": None,
                "tenant_id": "",
                "using": "default",
            },
        )
    ]


@pytest.mark.django_db
def test_a_job_enqueued_receiver_error_reaches_the_caller():
    def broken(**kwargs):
        raise RuntimeError("receiver broke")

    signals.job_enqueued.connect(broken, weak=False)
    try:
        with pytest.raises(RuntimeError, match="receiver broke"):
            jobqueue.enqueue("q", jobs.add, {"a": 1, "b": 2})
    finally:
        signals.job_enqueued.disconnect(broken)


@pytest.mark.django_db
def test_job_cancelled_is_sent_when_the_job_was_cancelled():
    job_id = jobqueue.enqueue("q", jobs.add, {"a": 1, "b": 2})
    jobqueue.enqueue("running", jobs.add, {"a": 1, "b": 2})
    [running] = get_store().claim(["running"], "w1", 1, 30.0)
    with Received(signals.job_cancelled) as received:
        assert jobqueue.cancel(job_id) is True
        assert jobqueue.cancel(job_id) is False  # already cancelled: no second signal
        # A running job's cancel is only requested: its worker sends the signal when it ends.
        assert jobqueue.cancel(running.id) is True
    assert received.calls == [("job_cancelled", {"job_id": job_id, "using": "default"})]


@pytest.mark.django_db
def test_job_started_is_sent_before_the_handler_and_a_bad_receiver_is_only_logged(caplog):
    def broken(**kwargs):
        raise RuntimeError("receiver broke")

    jobqueue.enqueue("q", jobs.add, {"a": 1, "b": 2})
    [claimed] = get_store().claim(["q"], "w1", 1, 30.0)
    context = context_for(claimed)
    signals.job_started.connect(broken, weak=False)
    try:
        with Received(signals.job_started) as received, caplog.at_level(logging.ERROR):
            outcome = execute(claimed, context)
    finally:
        signals.job_started.disconnect(broken)
    assert outcome.status == "succeeded" and outcome.result_json == "3"
    assert received.calls == [
        (
            "job_started",
            {
                "job_id": claimed.id,
                "job_type": "tests.testapp.jobs.add",
                "queue": "q",
                "attempt": 1,
                "max_attempts": claimed.max_attempts,
                "worker_id": "w1",
                "context": context,
            },
        )
    ]
    assert "job_started receiver" in caplog.text and "receiver broke" in caplog.text


def test_each_recorded_outcome_has_its_signal():
    claimed = ClaimedJob(
        id=7,
        job_type="t",
        payload={},
        attempt=2,
        max_attempts=3,
        timeout_s=30.0,
        lease_token=uuid.uuid4(),
        lease_until=datetime(2030, 1, 1, tzinfo=UTC),
        queue="q",
        priority=0,
        tenant_id="",
    )
    error = {"type": "ValueError", "message": "x"}
    common = {
        "job_id": 7,
        "job_type": "t",
        "queue": "q",
        "attempt": 2,
        "max_attempts": 3,
        "worker_id": "w9",
    }
    succeeded = RunOutcome(
        job_id=7, lease_token=TOKEN, state=JobState.SUCCEEDED, result_json='{"a":1}', duration_s=0.5
    )
    recorded = [
        (succeeded, "succeeded"),
        (
            RunOutcome(
                job_id=7,
                lease_token=TOKEN,
                state=JobState.SCHEDULED,
                error=error,
                delay_s=4.0,
                duration_s=0.5,
            ),
            "scheduled",
        ),
        (
            RunOutcome(
                job_id=7,
                lease_token=TOKEN,
                state=JobState.DEAD,
                error=error,
                dead_reason="timeout",
                duration_s=1,
            ),
            "dead",
        ),
        (
            RunOutcome(
                job_id=7, lease_token=TOKEN, state=JobState.SCHEDULED, error=error, delay_s=4.0
            ),
            "cancelled",
        ),
        (succeeded, "lost"),
    ]
    watched = (
        signals.job_succeeded,
        signals.job_retrying,
        signals.job_dead,
        signals.job_cancelled,
        signals.job_lease_lost,
    )
    with Received(*watched) as received:
        for outcome, state in recorded:
            send_outcome_signal(claimed, outcome, state, "w9", "default")
    assert received.calls == [
        ("job_succeeded", {**common, "result": {"a": 1}, "duration_s": 0.5}),
        ("job_retrying", {**common, "error": error, "delay_s": 4.0, "duration_s": 0.5}),
        ("job_dead", {**common, "error": error, "reason": "timeout", "duration_s": 1}),
        ("job_cancelled", {**common, "using": "default", "status": "retry"}),
        ("job_lease_lost", {**common, "status": "succeeded"}),
    ]


def test_a_receiver_connected_between_sends_gets_every_later_send():
    """Sends are skipped only while a signal has no receiver for ``Job``: whoever connects
    (for ``sender=Job`` or any sender) gets every send from then on, another sender's none."""
    claimed = ClaimedJob(
        id=8,
        job_type="t",
        payload={},
        attempt=1,
        max_attempts=3,
        timeout_s=30.0,
        lease_token=TOKEN,
        lease_until=datetime(2030, 1, 1, tzinfo=UTC),
        queue="q",
        priority=0,
        tenant_id="",
    )
    succeeded = RunOutcome(
        job_id=8, lease_token=TOKEN, state=JobState.SUCCEEDED, result_json="1", duration_s=0.1
    )
    for_job: list[int] = []
    for_other: list[int] = []

    def on_job(sender, job_id, **kwargs):
        for_job.append(job_id)

    def on_other(sender, job_id, **kwargs):
        for_other.append(job_id)

    for_any: list[int] = []

    def on_any(sender, job_id, **kwargs):
        for_any.append(job_id)

    signals.job_succeeded.connect(on_other, sender=ClaimedJob, weak=False)
    try:
        send_outcome_signal(claimed, succeeded, "succeeded", "w1", "default")
        signals.job_succeeded.connect(on_job, sender=Job, weak=False)
        for _ in range(3):
            send_outcome_signal(claimed, succeeded, "succeeded", "w1", "default")
        signals.job_succeeded.disconnect(on_job, sender=Job)
        send_outcome_signal(claimed, succeeded, "succeeded", "w1", "default")
        signals.job_succeeded.connect(on_any, weak=False)  # any sender
        for _ in range(2):
            send_outcome_signal(claimed, succeeded, "succeeded", "w1", "default")
    finally:
        signals.job_succeeded.disconnect(on_job, sender=Job)
        signals.job_succeeded.disconnect(on_other, sender=ClaimedJob)
        signals.job_succeeded.disconnect(on_any)
    assert for_job == [8, 8, 8]
    assert for_any == [8, 8]
    assert for_other == []


@pytest.mark.slow
@requires_postgres()
@pytest.mark.django_db(transaction=True)
def test_a_worker_sends_the_outcome_signals(workers, tmp_path, monkeypatch):
    log = tmp_path / "signals.jsonl"
    monkeypatch.setenv("JOBQUEUE_TEST_SIGNAL_LOG", str(log))
    ok = jobqueue.enqueue("sig", jobs.add, {"a": 1, "b": 2})
    flaky = jobqueue.enqueue("sig", jobs.fail, {"message": "down"}, max_attempts=2)
    permanent = jobqueue.enqueue("sig", jobs.fail_permanently, {"message": "no"})
    waiting = jobqueue.enqueue(
        "sig", jobs.wait_for_lease_lost, {"path": str(tmp_path / "wait.txt"), "max_s": 120}
    )
    proc = workers.start("--queues", "sig", "--concurrency", "4", settings=FAST_WORKER_SETTINGS)

    def lines():
        return [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []

    wait_for(lambda: (tmp_path / "wait.txt").exists(), timeout=60)
    jobqueue.cancel(waiting)  # a request: the heartbeat tells the handler, the job ends cancelled
    wait_for(lambda: any(s["signal"] == "job_cancelled" for s in lines()), timeout=60)
    wait_for(lambda: Job.objects.filter(id=flaky, state="dead").exists(), timeout=60)
    wait_for(lambda: sum(s["signal"] == "job_dead" for s in lines()) == 2, timeout=60)
    proc.send_signal(signal.SIGTERM)
    assert workers.exit_code(proc) == 0

    by_job: dict[int, list[tuple]] = {}
    for s in lines():
        if s["signal"].startswith("job_"):
            rest = {k: v for k, v in s.items() if k not in ("signal", "pid", "job_id")}
            by_job.setdefault(s["job_id"], []).append((s["signal"], rest))
    assert by_job[ok] == [
        ("job_started", {"attempt": 1}),
        ("job_succeeded", {"attempt": 1, "result": 3}),
    ]
    assert by_job[flaky] == [
        ("job_started", {"attempt": 1}),
        ("job_retrying", {"attempt": 1, "error": "ConnectionError", "delay_s": 0.1}),
        ("job_started", {"attempt": 2}),
        ("job_dead", {"attempt": 2, "error": "ConnectionError", "reason": "attempts_exhausted"}),
    ]
    assert by_job[permanent] == [
        ("job_started", {"attempt": 1}),
        ("job_dead", {"attempt": 1, "error": "PermanentError", "reason": "permanent_error"}),
    ]
    assert by_job[waiting] == [
        ("job_started", {"attempt": 1}),
        ("job_cancelled", {"attempt": 1, "status": "succeeded"}),
    ]


def test_signals_are_documented_with_their_arguments():
    doc = signals.__doc__ or ""
    for name in signals.__all__:
        assert f"``{name}``" in doc
    for argument in ("job_id", "attempt", "worker_id", "result", "error", "delay_s", "reason"):
        assert f"``{argument}``" in doc
