"""The executor: one claimed job in, one RunOutcome out. No database, no threads."""

from __future__ import annotations

import asyncio
import json
import logging
import random
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from django.test import override_settings

from jobqueue.client import job
from jobqueue.errors import RetryAfter
from jobqueue.retries import RunOutcome, full
from jobqueue.states import DeadReason
from jobqueue.store import ClaimedJob
from jobqueue.worker.context import JobContext
from jobqueue.worker.executor import execute, failure_outcome

# datetime.UTC is Python 3.11+; jobqueue supports 3.10.
UTC = timezone.utc

ADD = "tests.testapp.jobs.add"
FAIL = "tests.testapp.jobs.fail"
PERMANENT = "tests.testapp.jobs.fail_permanently"
RETRY_AFTER = "tests.testapp.jobs.retry_after"

ASYNC_STEPS: list[str] = []


@job(name="tests.worker.test_executor.non_json_result")
def non_json_result():
    return {"when": datetime(2025, 1, 1, tzinfo=UTC)}


@job(name="tests.worker.test_executor.tuple_result")
def tuple_result():
    return {"pair": (1, 2), 3: "three"}


@job(name="tests.worker.test_executor.echo_context", takes_context=True)
def echo_context(context, note):
    return {
        "job_id": context.job_id,
        "job_type": context.job_type,
        "queue": context.queue,
        "attempt": context.attempt,
        "max_attempts": context.max_attempts,
        "worker_id": context.worker_id,
        "idempotency_key": context.idempotency_key,
        "lease_lost": context.lease_lost,
        "note": note,
    }


@job(name="tests.worker.test_executor.async_handler")
async def async_handler(n):
    ASYNC_STEPS.append("start")
    await asyncio.sleep(0.01)
    ASYNC_STEPS.append("after sleep")
    return n * 2


@job(name="tests.worker.test_executor.async_failure")
async def async_failure():
    await asyncio.sleep(0)
    raise ConnectionError("async down")


@job(name="tests.worker.test_executor.system_exit")
def system_exit():
    raise SystemExit(3)


@job(name="tests.worker.test_executor.keyboard_interrupt")
def keyboard_interrupt():
    raise KeyboardInterrupt


@job(
    name="tests.worker.test_executor.own_backoff",
    backoff={"policy": "none", "base_seconds": 7, "cap_seconds": 100},
)
def own_backoff():
    raise ConnectionError("try later")


def claimed(
    job_type: str,
    payload: dict[str, Any] | None = None,
    *,
    attempt: int = 1,
    max_attempts: int = 3,
    job_id: int = 41,
) -> ClaimedJob:
    return ClaimedJob(
        id=job_id,
        job_type=job_type,
        payload=payload or {},
        attempt=attempt,
        max_attempts=max_attempts,
        timeout_s=30.0,
        lease_token=uuid.uuid4(),
        lease_until=datetime.now(UTC) + timedelta(seconds=30),
        queue="q",
        priority=0,
        tenant_id="",
    )


def run(job: ClaimedJob, worker_id: str = "w1", rng: random.Random | None = None) -> RunOutcome:
    context = JobContext(
        job_id=job.id,
        job_type=job.job_type,
        queue=job.queue,
        attempt=job.attempt,
        max_attempts=job.max_attempts,
        worker_id=worker_id,
    )
    return execute(job, context, rng=rng)


@pytest.fixture(autouse=True)
def default_backoff():
    with override_settings(JOBQUEUE={}):
        yield


def test_success_records_the_json_result():
    outcome = run(claimed(ADD, {"a": 2, "b": 3}))
    assert (outcome.status, outcome.result_json, outcome.error) == ("succeeded", "5", None)
    assert outcome.dead_reason is None
    assert outcome.duration_s >= 0.0


def test_result_is_stored_as_a_round_trip_yields():
    outcome = run(claimed("tests.worker.test_executor.tuple_result"))
    assert outcome.status == "succeeded"
    assert json.loads(outcome.result_json) == {"pair": [1, 2], "3": "three"}


def test_non_json_result_still_succeeds_with_a_null_result(caplog):
    with caplog.at_level(logging.WARNING, logger="jobqueue.executor"):
        outcome = run(claimed("tests.worker.test_executor.non_json_result"))
    assert (outcome.status, outcome.result_json) == ("succeeded", "null")
    assert "result not stored" in caplog.text
    assert "result['when']" in caplog.text


def test_permanent_error_is_dead_at_the_first_attempt():
    outcome = run(claimed(PERMANENT, {"message": "card declined"}, attempt=1, max_attempts=5))
    assert (outcome.status, outcome.dead_reason) == ("dead", DeadReason.PERMANENT_ERROR)
    assert outcome.error["type"] == "PermanentError"
    assert outcome.error["message"] == "card declined"
    assert outcome.error["attempt"] == 1
    assert outcome.error["worker"] == "w1"
    assert "PermanentError: card declined" in outcome.error["traceback"]


def test_retry_after_is_exact():
    outcome = run(claimed(RETRY_AFTER, {"seconds": 2.5}, attempt=1, max_attempts=3))
    assert (outcome.status, outcome.delay_s, outcome.dead_reason) == ("retry", 2.5, None)
    assert outcome.error["type"] == "RetryAfter"


def test_retry_after_on_the_last_attempt_is_dead_attempts_exhausted():
    outcome = run(claimed(RETRY_AFTER, {"seconds": 2.5}, attempt=3, max_attempts=3))
    assert (outcome.status, outcome.dead_reason) == ("dead", DeadReason.ATTEMPTS_EXHAUSTED)


def test_ordinary_error_retries_with_the_seeded_backoff():
    outcome = run(
        claimed(FAIL, {"message": "down"}, attempt=2, max_attempts=3), rng=random.Random(11)
    )
    assert outcome.status == "retry"
    assert outcome.delay_s == full(2, 1.0, 3600.0, random.Random(11))
    assert (outcome.error["type"], outcome.error["message"], outcome.error["attempt"]) == (
        "ConnectionError",
        "down",
        2,
    )


def test_ordinary_error_on_the_last_attempt_is_dead_attempts_exhausted():
    outcome = run(claimed(FAIL, {"message": "down"}, attempt=3, max_attempts=3))
    assert (outcome.status, outcome.dead_reason) == ("dead", DeadReason.ATTEMPTS_EXHAUSTED)
    assert outcome.error["message"] == "down"


def test_the_job_types_own_backoff_is_used():
    outcome = run(claimed("tests.worker.test_executor.own_backoff", attempt=2, max_attempts=5))
    assert (outcome.status, outcome.delay_s) == ("retry", 14.0)


@override_settings(JOBQUEUE={"BACKOFF": {"policy": "none", "base_seconds": 3, "cap_seconds": 5}})
def test_the_backoff_setting_is_used_for_types_without_their_own():
    assert run(claimed(FAIL, attempt=1)).delay_s == 3.0
    assert run(claimed(FAIL, attempt=2)).delay_s == 5.0


def test_unknown_type_retries_then_is_dead_unknown_type_on_the_last_attempt():
    outcome = run(claimed("tests.nowhere.missing_handler", attempt=1, max_attempts=2))
    assert outcome.status == "retry"
    assert outcome.error["type"] == "UnknownJobType"
    assert "tests.nowhere.missing_handler" in outcome.error["message"]
    outcome = run(claimed("tests.nowhere.missing_handler", attempt=2, max_attempts=2))
    assert (outcome.status, outcome.dead_reason) == ("dead", DeadReason.UNKNOWN_TYPE)


def test_a_handler_that_takes_context_gets_its_job_context():
    outcome = run(
        claimed(
            "tests.worker.test_executor.echo_context",
            {"note": "hi"},
            attempt=2,
            max_attempts=4,
            job_id=777,
        ),
        worker_id="pod-a",
    )
    assert outcome.status == "succeeded"
    assert json.loads(outcome.result_json) == {
        "job_id": 777,
        "job_type": "tests.worker.test_executor.echo_context",
        "queue": "q",
        "attempt": 2,
        "max_attempts": 4,
        "worker_id": "pod-a",
        "idempotency_key": "777",
        "lease_lost": False,
        "note": "hi",
    }


def test_an_async_handler_runs_to_completion():
    ASYNC_STEPS.clear()
    outcome = run(claimed("tests.worker.test_executor.async_handler", {"n": 21}))
    assert (outcome.status, outcome.result_json) == ("succeeded", "42")
    assert ASYNC_STEPS == ["start", "after sleep"]


def test_an_async_handlers_error_is_a_failure():
    outcome = run(claimed("tests.worker.test_executor.async_failure", attempt=1))
    assert (outcome.status, outcome.error["type"], outcome.error["message"]) == (
        "retry",
        "ConnectionError",
        "async down",
    )


@pytest.mark.parametrize(
    ("job_type", "error_type"),
    [
        ("tests.worker.test_executor.system_exit", "SystemExit"),
        ("tests.worker.test_executor.keyboard_interrupt", "KeyboardInterrupt"),
    ],
)
def test_system_exit_and_keyboard_interrupt_from_a_handler_are_failures(job_type, error_type):
    outcome = run(claimed(job_type, attempt=1, max_attempts=3))
    assert outcome.status == "retry"
    assert outcome.error["type"] == error_type
    outcome = run(claimed(job_type, attempt=3, max_attempts=3))
    assert (outcome.status, outcome.dead_reason) == ("dead", DeadReason.ATTEMPTS_EXHAUSTED)


def test_a_payload_that_does_not_fit_the_handler_is_a_failure():
    outcome = run(claimed(ADD, {"a": 1}, attempt=1))
    assert (outcome.status, outcome.error["type"]) == ("retry", "TypeError")


def test_failure_outcome_sanitises_what_postgresql_cannot_store():
    outcome = failure_outcome(claimed(FAIL), ValueError("bad \x00 byte \ud800"), "w\x00")
    assert outcome.error["message"] == "bad \\x00 byte ?"
    assert outcome.error["worker"] == "w\\x00"
    json.dumps(outcome.error).encode("utf-8")  # storable: no lone surrogate survives


@pytest.mark.parametrize("seconds", [-1, True, "2", float("nan"), float("inf"), None])
def test_retry_after_refuses_bad_seconds(seconds):
    with pytest.raises(ValueError, match="RetryAfter seconds"):
        RetryAfter(seconds)


def test_retry_after_keeps_integer_seconds_exact():
    assert RetryAfter(3).seconds == 3.0
    assert RetryAfter(0).seconds == 0.0


def test_a_handler_module_that_fails_to_import_records_the_import_error():
    """resolve() must not turn a broken handler module into "unknown job type"."""
    import uuid as _uuid
    from datetime import datetime

    from jobqueue.store import ClaimedJob
    from jobqueue.worker.context import JobContext
    from jobqueue.worker.executor import execute

    claimed = ClaimedJob(
        id=1,
        job_type="tests.testapp.broken_handlers.run",
        payload={},
        attempt=1,
        max_attempts=1,
        timeout_s=30.0,
        lease_token=_uuid.uuid4(),
        lease_until=datetime.now(UTC),
        queue="q",
        priority=0,
        tenant_id="",
    )
    context = JobContext(
        job_id=1, job_type=claimed.job_type, queue="q", attempt=1, max_attempts=1, worker_id="w"
    )
    outcome = execute(claimed, context)
    assert outcome.status == "dead"
    assert outcome.dead_reason == "attempts_exhausted"
    assert outcome.error["type"] == "ModuleNotFoundError"
    assert "a_module_that_does_not_exist" in outcome.error["message"]
