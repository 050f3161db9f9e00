"""Faults a first-time user hit, each as the whole kind of fault rather than the one input."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta

import pytest

import jobqueue
from jobqueue.errors import DuplicateJob, InvalidJobOption, InvalidPayload, JobNotFound, RetryAfter
from jobqueue.models import Job
from tests.conftest import FAST_WORKER_SETTINGS, ROOT, requires_postgres, subprocess_env, wait_for
from tests.testapp import jobs

FINISHED = {"succeeded", "dead", "cancelled"}


def state(job_id: int) -> str:
    return Job.objects.values_list("state", flat=True).get(id=job_id)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda: jobqueue.enqueue("q", jobs.add, {"a": 1}), InvalidPayload, "missing a required"),
        (
            lambda: jobqueue.enqueue("q", jobs.add, {"a": 1, "b": 2, "c": 3}),
            InvalidPayload,
            "unexpected keyword",
        ),
        (lambda: jobs.add.enqueue(a=1), InvalidPayload, "tests.testapp.jobs.add(a, b)"),
        (
            lambda: jobqueue.enqueue("q", "tests.testapp.jobs.add", {"x": 1}),
            InvalidPayload,
            "does not fit",
        ),
        (
            lambda: jobqueue.enqueue("q", jobs.noop, {}, dedupe_key=""),
            InvalidJobOption,
            "non-empty",
        ),
        (
            lambda: jobqueue.enqueue("q", jobs.noop, {}, max_attempts=10**10),
            InvalidJobOption,
            "1..10000",
        ),
        (lambda: jobqueue.cancel("abc"), JobNotFound, "'abc'"),
        (lambda: jobqueue.retry(-3), JobNotFound, "-3"),
    ],
)
def test_more_bad_input_is_refused_before_any_write(call, error, words):
    with pytest.raises(error) as excinfo:
        call()
    assert words in str(excinfo.value)
    assert Job.objects.count() == 0


@pytest.mark.django_db
def test_a_type_unknown_here_is_not_checked_against_a_signature():
    # Another service may own the handler; enqueue must not need it.
    job_id = jobqueue.enqueue("q", "billing.jobs.charge", {"anything": 1})
    assert Job.objects.get(id=job_id).payload == {"anything": 1}


def test_retry_after_takes_a_timedelta():
    assert RetryAfter(timedelta(minutes=2)).seconds == 120.0


def test_error_messages_are_capped_and_unprintable_errors_still_recorded():
    from jobqueue.history import ERROR_MESSAGE_CHARS, error_entry

    entry = error_entry(ValueError("x" * 1_000_000), attempt=1)
    assert len(entry["message"]) < ERROR_MESSAGE_CHARS + 40
    assert entry["message"].endswith("(1000000 characters)")
    entry = error_entry(jobs.UnprintableError(), attempt=2)
    assert (entry["type"], entry["message"]) == (
        "UnprintableError",
        "<unprintable UnprintableError>",
    )


@pytest.mark.django_db
def test_duplicate_job_on_retry_names_the_job_holding_the_key():
    first = jobqueue.enqueue("q", jobs.noop, {}, dedupe_key="k")
    jobqueue.cancel(first)
    holder = jobqueue.enqueue("q", jobs.noop, {}, dedupe_key="k")
    with pytest.raises(DuplicateJob) as excinfo:
        jobqueue.retry(first)
    assert excinfo.value.existing_id == holder
    assert f"job {holder} on queue 'q'" in str(excinfo.value)


@pytest.mark.slow
@requires_postgres()
@pytest.mark.django_db(transaction=True)
def test_unprintable_exception_is_recorded_and_the_slot_is_not_lost(workers):
    """An exception whose str() raises: recorded as such (not as a timeout), and the worker's
    only slot serves the next job at once."""
    bad = jobqueue.enqueue("unprintable", jobs.raise_unprintable, {}, max_attempts=1)
    good = jobqueue.enqueue("unprintable", jobs.noop, {})
    workers.start("--queues", "unprintable", "--concurrency", "1", settings=FAST_WORKER_SETTINGS)
    wait_for(lambda: state(bad) in FINISHED and state(good) in FINISHED, timeout=30)
    job = Job.objects.get(id=bad)
    assert (job.state, job.dead_reason) == ("dead", "attempts_exhausted")
    assert job.errors[-1]["type"] == "UnprintableError"
    assert state(good) == "succeeded"


@pytest.mark.slow
@requires_postgres()
@pytest.mark.django_db(transaction=True)
def test_many_runaway_handlers_never_stall_a_worker(workers):
    """Three times as many never-returning handlers as slots: each is failed at its timeout
    and the worker keeps serving; a normal job enqueued after them succeeds."""
    hung = [
        jobqueue.enqueue("hung", jobs.hang_forever, {}, timeout_s=0.5, max_attempts=1)
        for _ in range(6)
    ]
    w = workers.start("--queues", "hung", "--concurrency", "2", settings=FAST_WORKER_SETTINGS)
    wait_for(lambda: all(state(i) in FINISHED for i in hung), timeout=60)
    assert {(j.state, j.dead_reason) for j in Job.objects.filter(id__in=hung)} == {
        ("dead", "timeout")
    }
    after = jobqueue.enqueue("hung", jobs.noop, {})
    wait_for(lambda: state(after) == "succeeded", timeout=60)
    assert w.poll() is None


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_runworkers_refuses_an_unmigrated_database(tmp_path):
    env = subprocess_env()
    env["DATABASE_URL"] = f"sqlite:///{tmp_path / 'empty.sqlite3'}"
    result = subprocess.run(
        [sys.executable, "-m", "django", "runworkers", "--burst"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,  # a hang guard only: a loaded machine may take a minute to start Django
    )
    assert result.returncode == 1
    assert "run `python manage.py migrate` first" in result.stderr
    assert "0001_initial" in result.stderr
