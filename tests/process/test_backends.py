"""Django's documented Tasks API, end to end: enqueue here, run in real ``runworkers --burst``
processes, read the results back (``refresh()``, ``get_result`` from yet another process).

The tasks are in tests/testapp/tasks.py; workers find them by discovery. Their signal receivers
write what they saw to ``$JOBQUEUE_TEST_SIGNAL_LOG``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import timedelta

import pytest

pytest.importorskip("django.tasks")

from django.tasks import TaskResultStatus, default_task_backend
from django.utils import timezone

from tests.conftest import (
    FAST_WORKER_SETTINGS,
    ROOT,
    requires_postgres,
    subprocess_env,
    wait_for,
)
from tests.testapp import tasks

pytestmark = [pytest.mark.slow, requires_postgres(), pytest.mark.django_db(transaction=True)]


def run_until_finished(workers, results, *args: str, tries: int = 30) -> str:
    """Run ``runworkers --burst`` until every result is finished; return the workers' output.

    A burst worker exits when nothing is claimable, so a retry scheduled a moment later needs
    another run.
    """
    output = ""
    for _ in range(tries):
        proc = workers.run("--burst", *args, settings=FAST_WORKER_SETTINGS)
        output += proc.stdout + proc.stderr
        assert proc.returncode == 0, output
        for result in results:
            result.refresh()
        if all(result.is_finished for result in results):
            return output
        time.sleep(0.2)
    raise AssertionError(f"not finished after {tries} runs:\n{output}")


def signal_lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_the_documented_examples_run_on_a_worker_and_read_back_from_another_process(workers):
    emailed = tasks.email_users.enqueue(
        emails=["orders@example.com"], subject="You have a message", message="Hello there!"
    )
    added = tasks.add.enqueue(2, 3)
    awaited = tasks.async_add.enqueue(a=20, b=22)
    assert emailed.status == TaskResultStatus.READY

    run_until_finished(workers, [emailed, added, awaited], "--queues", "default")

    assert (emailed.status, emailed.return_value) == (TaskResultStatus.SUCCESSFUL, 1)
    assert (added.status, added.return_value) == (TaskResultStatus.SUCCESSFUL, 5)
    assert (awaited.status, awaited.return_value) == (TaskResultStatus.SUCCESSFUL, 42)
    for result in (emailed, added, awaited):
        assert result.attempts == 1 and result.errors == []
        assert result.started_at <= result.finished_at

    # get_result in a third process: neither the one that enqueued nor the worker.
    script = (
        "import json; from django.tasks import default_task_backend as b; "
        f"r = b.get_result({added.id!r}); "
        "print(json.dumps([r.id, r.status, r.return_value, r.args, r.task.module_path, "
        "len(r.worker_ids)]))"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "django", "shell", "-c", script],
        cwd=ROOT,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=300,  # a hang guard only: a loaded machine may take a minute to start Django
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == [
        added.id,
        "SUCCESSFUL",
        5,
        [2, 3],
        "tests.testapp.tasks.add",
        1,
    ]


def test_run_after_defers_the_task(workers):
    # Two tasks, so no burst has to finish before a deadline (a loaded machine takes seconds
    # just to start one): one due in an hour, which any burst must leave alone, and one due
    # in two seconds, which runs once due and not before.
    far = timezone.now() + timedelta(hours=1)
    deferred = tasks.add.using(run_after=far).enqueue(1, 1)
    run_after = timezone.now() + timedelta(seconds=2)
    result = tasks.add.using(run_after=run_after).enqueue(1, 1)
    wait_for(lambda: timezone.now() > run_after, timeout=60)
    run_until_finished(workers, [result], "--queues", "default")
    assert result.return_value == 2
    assert result.started_at >= run_after
    assert default_task_backend.get_result(result.id).task.run_after == run_after
    deferred.refresh()
    assert deferred.status == TaskResultStatus.READY  # not due: every burst worker left it
    assert default_task_backend.get_result(deferred.id).task.run_after == far


def test_priority_orders_the_runs(workers, tmp_path):
    path = tmp_path / "order.txt"
    labels = {"low": -10, "high-1": 50, "normal": 0, "urgent": 100, "high-2": 50}
    results = [
        tasks.record.using(priority=priority).enqueue(str(path), label)
        for label, priority in labels.items()
    ]
    run_until_finished(workers, results, "--queues", "tasks", "--concurrency", "1")
    assert path.read_text().split() == ["urgent", "high-1", "high-2", "normal", "low"]


def test_retries_context_attempts_failures_signals_and_logs(workers, tmp_path, monkeypatch):
    log = tmp_path / "signals.jsonl"
    monkeypatch.setenv("JOBQUEUE_TEST_SIGNAL_LOG", str(log))
    attempts_path = tmp_path / "flaky.jsonl"
    flaky = tasks.flaky.enqueue(path=str(attempts_path), fail_until=2)  # fails once
    failing = tasks.always_fails.enqueue("card declined")  # max_attempts=2

    output = run_until_finished(workers, [flaky, failing], "--queues", "default")

    # takes_context: the context's attempt and result follow the retries.
    seen = [json.loads(line) for line in attempts_path.read_text().splitlines()]
    assert [(s["attempt"], s["status"], s["errors"], len(s["worker_ids"])) for s in seen] == [
        (1, "RUNNING", 0, 1),
        (2, "RUNNING", 1, 2),
    ]
    assert (flaky.status, flaky.return_value) == (TaskResultStatus.SUCCESSFUL, {"attempt": 2})
    assert [e.exception_class_path for e in flaky.errors] == ["builtins.ConnectionError"]

    # A task that always fails: retried, then FAILED with one error per attempt.
    assert failing.status == TaskResultStatus.FAILED
    assert failing.attempts == 2
    assert [e.exception_class for e in failing.errors] == [ValueError, ValueError]
    assert "ValueError: card declined" in failing.errors[-1].traceback
    with pytest.raises(ValueError, match="Task failed"):
        _ = failing.return_value

    # Django's signals, as the worker's receivers saw them, sender the backend class.
    def steps(result_id):
        return [
            (s["signal"], s["status"], s["attempts"], s["errors"], s.get("in_handler"))
            for s in signal_lines(log)
            if s.get("id") == result_id and s["signal"].startswith("task_")
        ]

    assert steps(flaky.id) == [
        ("task_enqueued", "READY", 0, [], None),
        ("task_started", "RUNNING", 1, [], None),
        ("task_finished", "READY", 1, ["builtins.ConnectionError"], True),
        ("task_started", "RUNNING", 2, ["builtins.ConnectionError"], None),
        ("task_finished", "SUCCESSFUL", 2, ["builtins.ConnectionError"], False),
    ]
    assert steps(failing.id) == [
        ("task_enqueued", "READY", 0, [], None),
        ("task_started", "RUNNING", 1, [], None),
        ("task_finished", "READY", 1, ["builtins.ValueError"], True),
        ("task_started", "RUNNING", 2, ["builtins.ValueError"], None),
        ("task_finished", "FAILED", 2, ["builtins.ValueError"] * 2, True),
    ]
    worker_side = [s for s in signal_lines(log) if s["signal"] in ("task_started", "task_finished")]
    assert {s["sender"] for s in signal_lines(log) if s["signal"].startswith("task_")} == {
        "JobQueueBackend"
    }
    assert all(s["return_value"] == {"attempt": 2} for s in worker_side if "return_value" in s)

    # Django's own log line for the failure carries the traceback.
    line = f"Task id={failing.id} path=tests.testapp.tasks.always_fails state=FAILED"
    assert line in output
    after = output[output.index(line) :]
    assert "Traceback (most recent call last)" in after
    assert "ValueError: card declined" in after


def test_a_task_that_cannot_be_imported_shows_the_import_error_in_the_workers_log(workers):
    from jobqueue.models import Job
    from tests.factories import make_job

    job = make_job(
        type="tests.testapp.no_such_module.send",
        max_attempts=1,
        payload={"args": [], "kwargs": {}, "backend": "default", "run_after": None},
    )
    proc = workers.run("--burst", "--queues", "default", settings=FAST_WORKER_SETTINGS)
    assert proc.returncode == 0, proc.stderr
    job.refresh_from_db()
    assert (job.state, job.dead_reason) == ("dead", "unknown_type")
    dead_lines = [line for line in proc.stderr.splitlines() if f"job {job.id}" in line]
    assert any(
        "dead (unknown_type)" in line and "No module named 'tests.testapp.no_such_module'" in line
        for line in dead_lines
    ), proc.stderr
    assert "ModuleNotFoundError" in job.errors[0]["traceback"]
    assert Job.objects.filter(state="dead").count() == 1


def test_a_return_value_that_is_not_json_fails_the_task_on_a_worker(workers):
    result = tasks.give_back.enqueue("a set")
    run_until_finished(workers, [result], "--queues", "default")
    assert (result.status, result.attempts) == (TaskResultStatus.FAILED, 1)
    assert issubclass(result.errors[0].exception_class, TypeError)
