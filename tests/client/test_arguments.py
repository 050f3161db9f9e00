# ruff: noqa: E501 - one row per line reads as a table
"""Every public function of ``jobqueue`` checks its arguments before any SQL runs.

One table for the whole public surface (``jobqueue.__all__``; a test fails if a function has no
row). Each row: the function, what is wrong, the call, the documented error, words its message
must contain. Every call runs inside the caller's ``transaction.atomic()``, next to a dead and a
leased job: after the error the transaction is still usable (nothing reached the database, or
the database's refusal did not abort it) and no row changed.
"""

from __future__ import annotations

import uuid
from datetime import datetime

import pytest
from django.db import transaction

import jobqueue
from jobqueue.errors import (
    BatchNotFound,
    InvalidCronExpression,
    InvalidJobOption,
    InvalidPayload,
    JobNotFound,
    JobQueueConfigurationError,
    LeaseLost,
)
from jobqueue.models import CronEntry, DependencyBreaker, Job
from jobqueue.states import JobState
from tests.factories import make_job

NOOP = "tests.testapp.jobs.noop"
HUGE = 10**5000  # 5,000 digits: over Python's int-to-text limit (4,300)
BIG_ID = 10**30  # over bigint
TOKEN = uuid.uuid4()


def noop_handler(**kwargs):
    return None


# (function, what is wrong, call(ids), error, words). ``ids`` has "dead", "leased", "token".
CASES = [
    ("enqueue", "queue not a name", lambda ids: jobqueue.enqueue(5, NOOP), InvalidJobOption, "queue"),
    ("enqueue", "job type not text", lambda ids: jobqueue.enqueue("q", 5), InvalidJobOption, "job_type"),
    ("enqueue", "5,000-digit int", lambda ids: jobqueue.enqueue("q", NOOP, {"n": [HUGE]}), InvalidPayload, "payload['n'][0]"),
    ("enqueue", "priority a string", lambda ids: jobqueue.enqueue("q", NOOP, priority="1"), InvalidJobOption, "priority"),
    ("enqueue", "unknown database", lambda ids: jobqueue.enqueue("q", NOOP, using="nope"), InvalidJobOption, "using"),
    ("enqueue", "after a string", lambda ids: jobqueue.enqueue("q", NOOP, after="12"), InvalidJobOption, "after"),
    ("enqueue", "after no such job", lambda ids: jobqueue.enqueue("q", NOOP, after=[ids["dead"], 987654321]), InvalidJobOption, "987654321"),
    ("enqueue", "flag without after", lambda ids: jobqueue.enqueue("q", NOOP, takes_parent_results=True), InvalidJobOption, "takes_parent_results"),
    ("step", "not a step option", lambda ids: jobqueue.step(NOOP, after=[1]), InvalidJobOption, "after"),
    ("chain", "no steps", lambda ids: jobqueue.chain(), InvalidJobOption, "steps"),
    ("chain", "not a step", lambda ids: jobqueue.chain(jobqueue.step(NOOP, queue="q"), 5), InvalidJobOption, "steps[1]"),
    ("chain", "unknown database", lambda ids: jobqueue.chain(jobqueue.step(NOOP, queue="q"), using="nope"), InvalidJobOption, "using"),
    ("enqueue_many", "not an iterable", lambda ids: jobqueue.enqueue_many(5), InvalidJobOption, "jobs"),
    ("enqueue_many", "one dict, not a list", lambda ids: jobqueue.enqueue_many({"queue": "q"}), InvalidJobOption, "jobs"),
    ("enqueue_many", "5,000-digit int", lambda ids: jobqueue.enqueue_many([{"queue": "q", "job_type": NOOP, "payload": {"n": HUGE}}]), InvalidPayload, "jobs[0].payload['n']"),
    ("enqueue_many", "chunk_bytes 0", lambda ids: jobqueue.enqueue_many([], chunk_bytes=0), InvalidJobOption, "chunk_bytes"),
    ("enqueue_many", "unknown database", lambda ids: jobqueue.enqueue_many([], using="nope"), InvalidJobOption, "using"),
    ("claim", "max_jobs over bigint", lambda ids: jobqueue.claim("q", "w", BIG_ID), InvalidJobOption, "max_jobs"),
    ("claim", "lease NaN", lambda ids: jobqueue.claim("q", "w", 1, lease_s=float("nan")), InvalidJobOption, "lease_s"),
    ("claim", "queue a number", lambda ids: jobqueue.claim(5, "w", 1), InvalidJobOption, "queue"),
    ("claim", "worker id with NUL", lambda ids: jobqueue.claim("q", "w\x00", 1), InvalidJobOption, "worker_id"),
    ("claim", "unknown database", lambda ids: jobqueue.claim("q", "w", 1, using="nope"), InvalidJobOption, "using"),
    ("heartbeat", "id over bigint", lambda ids: jobqueue.heartbeat(BIG_ID, TOKEN), LeaseLost, "lease"),
    ("heartbeat", "id a string", lambda ids: jobqueue.heartbeat("1; drop table x", TOKEN), LeaseLost, "lease"),
    ("heartbeat", "token not a UUID", lambda ids: jobqueue.heartbeat(ids["leased"], "x"), LeaseLost, "'x'"),
    ("heartbeat", "lease infinite", lambda ids: jobqueue.heartbeat(ids["leased"], ids["token"], lease_s=float("inf")), InvalidJobOption, "lease_s"),
    ("ack", "token not a UUID", lambda ids: jobqueue.ack(ids["leased"], "not-a-uuid"), LeaseLost, "not-a-uuid"),
    ("ack", "id a string", lambda ids: jobqueue.ack("1; drop table x", TOKEN), LeaseLost, "lease"),
    ("ack", "id a float", lambda ids: jobqueue.ack(1.0, TOKEN), LeaseLost, "lease"),
    ("ack", "5,000-digit result", lambda ids: jobqueue.ack(ids["leased"], ids["token"], {"n": HUGE}), InvalidPayload, "result['n']"),
    ("nack", "error not an exception", lambda ids: jobqueue.nack(ids["leased"], ids["token"], 5), InvalidJobOption, "error"),
    ("nack", "naive retry_at", lambda ids: jobqueue.nack(ids["leased"], ids["token"], "x", datetime(2030, 1, 1)), InvalidJobOption, "naive"),
    ("nack", "id over bigint", lambda ids: jobqueue.nack(BIG_ID, TOKEN, "x"), LeaseLost, "lease"),
    ("cancel", "id a string", lambda ids: jobqueue.cancel("abc"), JobNotFound, "'abc'"),
    ("cancel", "id over bigint", lambda ids: jobqueue.cancel(BIG_ID), JobNotFound, "no job"),
    ("cancel", "id a bool", lambda ids: jobqueue.cancel(True), JobNotFound, "no job"),
    ("cancel", "unknown database", lambda ids: jobqueue.cancel(ids["dead"], using="nope"), InvalidJobOption, "using"),
    ("retry", "id a string", lambda ids: jobqueue.retry("abc"), JobNotFound, "'abc'"),
    ("retry", "id over bigint", lambda ids: jobqueue.retry(BIG_ID), JobNotFound, "no job"),
    ("retry", "id 0", lambda ids: jobqueue.retry(0), JobNotFound, "no job"),
    ("retry_many", "a string", lambda ids: jobqueue.retry_many("123"), InvalidJobOption, "job_ids"),
    ("retry_many", "not an iterable", lambda ids: jobqueue.retry_many(5), InvalidJobOption, "job_ids"),
    ("retry_many", "unknown database", lambda ids: jobqueue.retry_many([1], using=["x"]), InvalidJobOption, "using"),
    ("run_now", "id a string", lambda ids: jobqueue.run_now("abc"), JobNotFound, "'abc'"),
    ("run_now", "id over bigint", lambda ids: jobqueue.run_now(-BIG_ID), JobNotFound, "no job"),
    ("schedule", "bad expression", lambda ids: jobqueue.schedule("s", "61 * * * *", "q", NOOP), InvalidCronExpression, "61"),
    ("schedule", "priority out of range", lambda ids: jobqueue.schedule("s", "* * * * *", "q", NOOP, priority=500), InvalidJobOption, "priority"),
    ("schedule", "unknown database", lambda ids: jobqueue.schedule("s", "* * * * *", "q", NOOP, using="nope"), InvalidJobOption, "using"),
    ("open_breaker", "bad name", lambda ids: jobqueue.open_breaker("a b"), InvalidJobOption, "dependency name"),
    ("open_breaker", "seconds infinite", lambda ids: jobqueue.open_breaker("api", float("inf")), InvalidJobOption, "seconds"),
    ("open_breaker", "reason with NUL", lambda ids: jobqueue.open_breaker("api", 5, reason="a\x00"), InvalidJobOption, "reason"),
    ("open_breaker", "unknown database", lambda ids: jobqueue.open_breaker("api", 5, using="nope"), InvalidJobOption, "using"),
    ("close_breaker", "bad name", lambda ids: jobqueue.close_breaker(""), InvalidJobOption, "dependency name"),
    ("close_breaker", "reason too long", lambda ids: jobqueue.close_breaker("api", reason="r" * 201), InvalidJobOption, "reason"),
    ("pause", "bad name", lambda ids: jobqueue.pause("a b"), InvalidJobOption, "queue name"),
    ("pause", "by not text", lambda ids: jobqueue.pause("q", by=5), InvalidJobOption, "by"),
    ("pause", "reason too long", lambda ids: jobqueue.pause("q", reason="r" * 201), InvalidJobOption, "reason"),
    ("pause", "unknown database", lambda ids: jobqueue.pause("q", using="nope"), InvalidJobOption, "using"),
    ("pause_type", "name with a space", lambda ids: jobqueue.pause_type("a b"), InvalidJobOption, "job type name"),
    ("pause_type", "reason with NUL", lambda ids: jobqueue.pause_type(NOOP, reason="a\x00"), InvalidJobOption, "reason"),
    ("resume", "bad name", lambda ids: jobqueue.resume(""), InvalidJobOption, "queue name"),
    ("resume", "unknown database", lambda ids: jobqueue.resume("q", using="nope"), InvalidJobOption, "using"),
    ("resume_type", "not text", lambda ids: jobqueue.resume_type(5), InvalidJobOption, "job type name"),
    ("paused", "unknown database", lambda ids: jobqueue.paused(using="nope"), InvalidJobOption, "using"),
    ("status", "id a string", lambda ids: jobqueue.status("abc"), JobNotFound, "'abc'"),
    ("status", "unknown database", lambda ids: jobqueue.status(ids["dead"], using="nope"), InvalidJobOption, "using"),
    ("result", "id over bigint", lambda ids: jobqueue.result(BIG_ID), JobNotFound, "no job"),
    ("result", "no such job", lambda ids: jobqueue.result(987654321), JobNotFound, "987654321"),
    ("wait", "id a bool", lambda ids: jobqueue.wait(True, timeout=1), JobNotFound, "no job"),
    ("wait", "timeout negative", lambda ids: jobqueue.wait(ids["dead"], timeout=-1), InvalidJobOption, "timeout"),
    ("wait", "poll_s NaN", lambda ids: jobqueue.wait(ids["dead"], poll_s=float("nan")), InvalidJobOption, "poll_s"),
    ("wait", "unknown database", lambda ids: jobqueue.wait(ids["dead"], using="nope"), InvalidJobOption, "using"),
    ("batch", "payload not a dict", lambda ids: jobqueue.batch(payload=[1]), InvalidJobOption, "payload"),
    ("batch", "callback type not text", lambda ids: jobqueue.batch(on_complete=5), InvalidJobOption, "on_complete.job_type"),
    ("batch", "unknown database", lambda ids: jobqueue.batch(using="nope"), InvalidJobOption, "using"),
    ("batch_status", "id a string", lambda ids: jobqueue.batch_status("abc"), BatchNotFound, "'abc'"),
    ("batch_status", "id over bigint", lambda ids: jobqueue.batch_status(BIG_ID), BatchNotFound, "no batch"),
    ("batch_status", "unknown database", lambda ids: jobqueue.batch_status(1, using="nope"), InvalidJobOption, "using"),
    ("job", "max_attempts 0", lambda ids: jobqueue.job(max_attempts=0)(noop_handler), JobQueueConfigurationError, "max_attempts"),
    ("job", "timeout NaN", lambda ids: jobqueue.job(timeout_s=float("nan"))(noop_handler), JobQueueConfigurationError, "timeout_s"),
]  # fmt: skip


def test_every_public_function_has_bad_argument_rows():
    # Classes (the context handlers receive, the errors, the values status() returns) are not
    # called with arguments.
    functions = {n for n in jobqueue.__all__ if not isinstance(getattr(jobqueue, n), type)}
    assert functions == {case[0] for case in CASES}


def snapshot() -> list[tuple]:
    return [
        *Job.objects.order_by("id").values_list("id", "state", "attempts", "lease_token", "run_at"),
        *CronEntry.objects.values_list("name"),
        *DependencyBreaker.objects.values_list("name", "state"),
    ]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("function", "wrong", "call", "error", "words"),
    CASES,
    ids=[f"{c[0]}: {c[1]}" for c in CASES],
)
def test_bad_arguments_raise_the_documented_error_and_leave_the_transaction_usable(
    function, wrong, call, error, words
):
    leased = make_job(JobState.LEASED)
    ids = {"dead": make_job(JobState.DEAD).id, "leased": leased.id, "token": leased.lease_token}
    before = snapshot()
    with transaction.atomic():
        with pytest.raises(error) as excinfo:
            call(ids)
        assert words in str(excinfo.value)
        # Still usable: a query runs, and nothing changed.
        assert snapshot() == before


@pytest.mark.django_db
def test_retry_many_reports_ids_no_job_can_have_as_missing_and_retries_the_rest():
    dead = make_job(JobState.DEAD).id
    with transaction.atomic():
        result = jobqueue.retry_many([dead, "abc", BIG_ID, 0, None, 987654321])
        assert result.retried == (dead,)
        assert list(result.missing) == [987654321, "abc", BIG_ID, 0, None]
        assert Job.objects.get(id=dead).state == JobState.READY


@pytest.mark.parametrize(
    "call",
    [
        lambda job, token: jobqueue.heartbeat(job, token),
        lambda job, token: jobqueue.ack(job, token),
        lambda job, token: jobqueue.nack(job, token, "boom"),
    ],
    ids=["heartbeat", "ack", "nack"],
)
def test_a_lease_call_with_no_possible_job_or_token_says_which_is_wrong(call):
    # Still LeaseLost (the documented type: no lease can be held under them), but the message
    # names the argument, not a reclaim or a reaper that never happened.
    with pytest.raises(LeaseLost, match=r"^'x' is not a job id \(an integer in 1\.\.") as lost:
        call("x", "y")
    assert lost.value.job_id == "x"
    assert "was lost" not in str(lost.value)
    with pytest.raises(LeaseLost, match=r"^'y' is not a lease token \(a UUID\)") as lost:
        call(7, "y")
    assert lost.value.job_id == 7
    assert "was lost" not in str(lost.value)
