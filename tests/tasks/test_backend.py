"""The ``django.tasks`` backend in this process: enqueue, results, validation, and running a task
through the executor the way a worker does. The end-to-end runs through real ``runworkers``
processes are in ``test_process_backends.py``.
"""

from __future__ import annotations

import logging
from dataclasses import fields, replace
from datetime import datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest

pytest.importorskip("django.tasks")

from asgiref.sync import async_to_sync
from django.db import connection, transaction
from django.tasks import TaskResultStatus, default_task_backend, task, task_backends
from django.tasks.exceptions import (
    InvalidTask,
    InvalidTaskBackend,
    TaskResultDoesNotExist,
    TaskResultMismatch,
)
from django.tasks.signals import task_enqueued, task_finished, task_started
from django.test import override_settings
from django.utils import timezone
from django.utils.module_loading import import_string

import jobqueue
from jobqueue import registry
from jobqueue.backends import (
    JobQueueBackend,
    JobQueueTask,
    to_task_result_status,
)
from jobqueue.errors import InvalidPayload
from jobqueue.limits.fairness import rate_limits
from jobqueue.models import Job
from jobqueue.settings.rates import Limiter
from jobqueue.states import JobState
from jobqueue.store import get_store
from jobqueue.tasks import backend as tasks_backend
from jobqueue.tasks import options as tasks_options
from tests import factories
from tests.factories import make_job
from tests.testapp import tasks

pytestmark = pytest.mark.django_db

TASKS_SETTING = {
    "default": {
        "BACKEND": "jobqueue.backends.JobQueueBackend",
        "QUEUES": ["default", "tasks", "emails"],
    },
    "immediate": {"BACKEND": "django.tasks.backends.immediate.ImmediateBackend"},
}


def with_tasks(**default_entry):
    """Override ``TASKS["default"]`` (keeping the other aliases)."""
    return override_settings(
        TASKS={**TASKS_SETTING, "default": {**TASKS_SETTING["default"], **default_entry}}
    )


class Recorder:
    """Connect to signals for one test and keep (signal name, sender, task_result snapshot)."""

    def __init__(self, *signals):
        self.seen: list[dict] = []
        self.signals = signals

    def __enter__(self):
        for signal in self.signals:
            signal.connect(self.receive, weak=False)
        return self

    def __exit__(self, *exc):
        for signal in self.signals:
            signal.disconnect(self.receive)

    def receive(self, signal, sender, task_result, **kwargs):
        import sys

        name = {task_enqueued: "enqueued", task_started: "started", task_finished: "finished"}
        self.seen.append(
            {
                "signal": name[signal],
                "sender": sender,
                "id": task_result.id,
                "status": task_result.status,
                "attempts": task_result.attempts,
                "errors": [e.exception_class_path for e in task_result.errors],
                "in_handler": sys.exc_info()[0] is not None,
            }
        )


def run_one(queue: str = "default", worker_id: str = "w1", now: datetime | None = None):
    """Claim one job, run it, record the outcome (a retry is due at once); return the outcome."""
    return factories.run_one(queue, worker_id, now, retry_in=0.0)[1]


# -- the backend and enqueue ---------------------------------------------------------------


def test_the_backend_supports_everything_django_asks_about():
    backend = task_backends["default"]
    assert isinstance(backend, JobQueueBackend)
    assert (
        backend.supports_defer,
        backend.supports_priority,
        backend.supports_get_result,
        backend.supports_async_task,
    ) == (True, True, True, True)
    assert backend.task_class is JobQueueTask
    assert isinstance(tasks.add, JobQueueTask)


def test_enqueue_returns_a_ready_result_whose_id_is_the_job_id():
    result = tasks.add.enqueue(2, b=3)
    assert result.status == TaskResultStatus.READY
    assert (result.args, result.kwargs, result.backend) == ([2], {"b": 3}, "default")
    assert result.task == tasks.add
    assert (result.errors, result.worker_ids, result.attempts) == ([], [], 0)
    assert result.enqueued_at is not None and result.finished_at is None
    job = Job.objects.get(id=int(result.id))
    assert (job.type, job.queue, job.priority, job.state) == (
        "tests.testapp.tasks.add",
        "default",
        0,
        JobState.READY,
    )
    assert job.payload == {"args": [2], "kwargs": {"b": 3}, "backend": "default", "run_after": None}
    with pytest.raises(ValueError, match="not finished"):
        _ = result.return_value


def test_enqueue_joins_the_callers_transaction():
    class Rollback(Exception):
        pass

    with pytest.raises(Rollback):
        with transaction.atomic():
            result = tasks.add.enqueue(1, 1)
            assert Job.objects.filter(id=int(result.id)).exists()
            raise Rollback
    assert not Job.objects.filter(id=int(result.id)).exists()
    with pytest.raises(TaskResultDoesNotExist):
        tasks.add.get_result(result.id)


def test_enqueue_is_one_statement_on_postgresql(django_assert_num_queries):
    if connection.vendor != "postgresql":
        pytest.skip("the ORM store takes a few statements")
    with django_assert_num_queries(1):
        tasks.add.enqueue(1, 2)


def test_run_after_defers_and_priority_is_stored():
    when = timezone.now() + timedelta(hours=1)
    result = tasks.add.using(run_after=when, priority=40, queue_name="tasks").enqueue(1, 2)
    job = Job.objects.get(id=int(result.id))
    assert (job.state, job.run_at, job.priority, job.queue) == (
        JobState.SCHEDULED,
        when,
        40,
        "tasks",
    )
    fetched = default_task_backend.get_result(result.id)
    assert fetched.task.run_after == when
    assert (fetched.task.priority, fetched.task.queue_name) == (40, "tasks")
    assert fetched.status == TaskResultStatus.READY
    assert not get_store().claim(["tasks"], "w1", 1, 30.0)  # not due yet


def test_the_jobqueue_extras_of_the_task_class():
    first = tasks.charge.enqueue(order_id=7)
    job = Job.objects.get(id=int(first.id))
    assert (job.dedupe_key, job.tenant_id) == ("order:7", "acme")
    with Recorder(task_enqueued) as recorder:
        again = tasks.charge.enqueue(order_id=7)
    assert again.id == first.id
    assert recorder.seen == []  # nothing new was enqueued
    assert Job.objects.count() == 1

    flaky = Job.objects.get(id=int(tasks.flaky.enqueue(path="/dev/null", fail_until=0).id))
    assert flaky.max_attempts == 3
    quick = tasks.add.using(max_attempts=5, timeout=timedelta(seconds=90), tenant="t1")
    assert isinstance(quick, JobQueueTask) and quick.timeout_s == 90.0
    job = Job.objects.get(id=int(quick.enqueue(1, 2).id))
    assert (job.max_attempts, job.timeout_s, job.tenant_id) == (5, 90.0, "t1")


def test_a_task_declares_a_concurrency_key_and_limit():
    job = Job.objects.get(id=int(tasks.per_account.enqueue(account_id=7).id))
    assert (job.concurrency_key, job.concurrency_limit) == ("acct:7", 2)


def test_a_task_declares_a_rate_limit_that_every_claim_applies():
    """``@task(rate_limit=)`` limits the task's job type as ``@job(rate_limit=)`` does."""
    name = tasks.rate_limited.module_path
    assert rate_limits().types[name] == Limiter(5, 2, "5/s")
    assert rate_limits().keys_of(name, "") == [f"type:{name}"]
    # The setting, keyed by the task's import path, wins.
    with override_settings(JOBQUEUE={"RATE_LIMITS": {"type": {name: "1/s"}}}):
        assert rate_limits().types[name] == Limiter(1, 1, "1/s")


def test_a_task_with_a_rate_that_is_not_one_is_refused_naming_it():
    # replace() builds the task again, and the backend validates it as @task would.
    with pytest.raises(InvalidTask, match=r"rate_limit"):
        replace(tasks.rate_limited, rate_limit="fast")


def test_options_give_defaults_and_settings_the_rest():
    with with_tasks(OPTIONS={"max_attempts": 4, "timeout_s": 12}):
        job = Job.objects.get(id=int(tasks.add.enqueue(1, 2).id))
        assert (job.max_attempts, job.timeout_s) == (4, 12.0)
        job = Job.objects.get(id=int(tasks.flaky.enqueue(path="x", fail_until=0).id))
        assert job.max_attempts == 3  # the task's own wins
    with override_settings(JOBQUEUE={"MAX_ATTEMPTS": 6, "TIMEOUT_SECONDS": 7}):
        job = Job.objects.get(id=int(tasks.add.enqueue(1, 2).id))
        assert (job.max_attempts, job.timeout_s) == (6, 7.0)


def test_a_bad_tasks_entry_is_reported_at_enqueue():
    with with_tasks(OPTIONS={"max_attemps": 4}):
        with pytest.raises(InvalidTaskBackend, match="unknown keys: max_attemps"):
            tasks.add.enqueue(1, 2)
        with pytest.raises(InvalidTaskBackend):
            default_task_backend.get_result("1")


def test_aenqueue_and_aget_result():
    result = async_to_sync(tasks.add.aenqueue)(4, 5)
    assert result.status == TaskResultStatus.READY
    fetched = async_to_sync(tasks.add.aget_result)(result.id)
    assert (fetched.id, fetched.args) == (result.id, [4, 5])
    async_to_sync(result.arefresh)()
    assert result.status == TaskResultStatus.READY


# -- validation, as Django's own backends do it --------------------------------------------


def local_function_task():
    def inner():
        pass

    return inner


def module_level(x):
    return x


async def module_level_async(x):
    return x


def no_context(x):
    return x


def test_a_function_that_is_not_module_level_is_refused():
    with pytest.raises(InvalidTask, match="module level"):
        task(local_function_task())
    with pytest.raises(InvalidTask, match="module level"):
        task(lambda: None)


def test_a_priority_out_of_range_is_refused():
    for bad in (101, -101):
        with pytest.raises(InvalidTask, match="priority"):
            tasks.add.using(priority=bad)
        with pytest.raises(InvalidTask, match="priority"):
            task(priority=bad)(module_level)


def test_a_queue_not_in_queues_is_refused():
    with pytest.raises(InvalidTask, match="Queue 'elsewhere' is not valid"):
        tasks.add.using(queue_name="elsewhere")
    with pytest.raises(InvalidTask, match="Queue 'elsewhere' is not valid"):
        task(queue_name="elsewhere")(module_level)


def test_with_no_queues_listed_any_valid_queue_name_is_allowed():
    with with_tasks(QUEUES=[]):
        assert tasks.add.using(queue_name="anything").queue_name == "anything"
        with pytest.raises(InvalidTask, match="queue name"):
            tasks.add.using(queue_name="not a queue")


def test_a_naive_run_after_is_refused():
    with pytest.raises(InvalidTask, match="aware"):
        tasks.add.using(run_after=datetime(2030, 1, 1))


def test_takes_context_needs_a_context_parameter():
    with pytest.raises(InvalidTask, match="context"):
        task(takes_context=True)(no_context)


def test_async_functions_are_accepted():
    async_task = task(module_level_async)
    assert async_task.enqueue(1).status == TaskResultStatus.READY


def test_bad_extras_are_refused():
    with pytest.raises(InvalidTask, match="max_attempts"):
        task(max_attempts=0)(module_level)
    with pytest.raises(InvalidTask, match="timeout"):
        task(timeout=-1)(module_level)
    with pytest.raises(InvalidTask, match="dedupe_key"):
        task(dedupe_key=5)(module_level)


# -- results -------------------------------------------------------------------------------


@pytest.mark.parametrize("bad_id", ["", "abc", "0", "-1", "1.0", " 1", "\u0661", "9" * 20, "01"])
def test_unknown_or_malformed_ids_do_not_exist(bad_id):
    with pytest.raises(TaskResultDoesNotExist):
        default_task_backend.get_result(bad_id)


def test_an_unknown_id_does_not_exist():
    result = tasks.add.enqueue(1, 2)
    with pytest.raises(TaskResultDoesNotExist):
        default_task_backend.get_result(str(int(result.id) + 1000))


def test_a_native_job_is_not_a_task_result():
    job_id = jobqueue.enqueue("default", "tests.testapp.jobs.add", {"a": 1, "b": 2})
    with pytest.raises(TaskResultDoesNotExist):
        default_task_backend.get_result(str(job_id))


def test_get_result_of_another_task_is_a_mismatch():
    result = tasks.add.enqueue(1, 2)
    with pytest.raises(TaskResultMismatch):
        tasks.charge.get_result(result.id)


def test_the_one_status_mapping():
    assert {state: to_task_result_status(state) for state in JobState} == {
        JobState.READY: TaskResultStatus.READY,
        JobState.SCHEDULED: TaskResultStatus.READY,
        JobState.LEASED: TaskResultStatus.RUNNING,
        JobState.SUCCEEDED: TaskResultStatus.SUCCESSFUL,
        JobState.DEAD: TaskResultStatus.FAILED,
        JobState.CANCELLED: TaskResultStatus.FAILED,
        JobState.WAITING: TaskResultStatus.READY,
    }


def test_a_cancelled_task_is_failed():
    result = tasks.add.enqueue(1, 2)
    jobqueue.cancel(int(result.id))
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result.errors == []


# -- running, as a worker does -------------------------------------------------------------


def test_a_task_runs_and_its_result_reads_back_successful():
    result = tasks.add.enqueue(2, 3)
    with Recorder(task_started, task_finished) as recorder:
        outcome = run_one()
    assert outcome.status == "succeeded" and outcome.result_json == "5"
    assert [(s["signal"], s["status"], s["attempts"]) for s in recorder.seen] == [
        ("started", TaskResultStatus.RUNNING, 1),
        ("finished", TaskResultStatus.SUCCESSFUL, 1),
    ]
    assert all(s["sender"] is JobQueueBackend for s in recorder.seen)
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == 5
    assert result.worker_ids == ["w1"]
    assert result.started_at is not None and result.finished_at is not None
    assert result.last_attempted_at == result.started_at


def test_an_async_task_runs_to_completion():
    result = tasks.async_add.enqueue(20, 22)
    assert run_one().result_json == "42"
    assert default_task_backend.get_result(result.id).return_value == 42


def test_takes_context_sees_the_attempt_and_failures_retry_then_fail(tmp_path, caplog):
    path = tmp_path / "flaky.jsonl"
    result = tasks.flaky.enqueue(path=str(path), fail_until=99)  # max_attempts=3: never passes
    later = timezone.now() + timedelta(days=1)  # stands in for the database clock: retry due
    with Recorder(task_started, task_finished) as recorder:
        with caplog.at_level(logging.INFO, logger="django.tasks"):
            statuses = [run_one(worker_id=f"w{n}", now=later).status for n in (1, 2, 3)]
    assert statuses == ["retry", "retry", "dead"]
    import json

    seen = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(s["attempt"], s["errors"], s["worker_ids"]) for s in seen] == [
        (1, 0, ["w1"]),
        (2, 1, ["w1", "w2"]),
        (3, 2, ["w1", "w2", "w3"]),
    ]
    assert {s["id"] for s in seen} == {result.id}
    finished = [s for s in recorder.seen if s["signal"] == "finished"]
    assert [(s["status"], len(s["errors"]), s["in_handler"]) for s in finished] == [
        (TaskResultStatus.READY, 1, True),
        (TaskResultStatus.READY, 2, True),
        (TaskResultStatus.FAILED, 3, True),
    ]
    # Django's log receiver got the traceback: it is sent inside the exception handler.
    [failed_record] = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert "state=FAILED" in failed_record.getMessage()
    assert failed_record.exc_info and failed_record.exc_info[0] is ConnectionError

    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert [e.exception_class_path for e in result.errors] == ["builtins.ConnectionError"] * 3
    assert result.errors[0].exception_class is ConnectionError
    assert "ConnectionError: attempt 3 failed" in result.errors[-1].traceback
    assert result.worker_ids == ["w1", "w2", "w3"] and result.attempts == 3
    with pytest.raises(ValueError, match="failed"):
        _ = result.return_value


def test_a_task_moved_onto_jobqueue_from_another_backend_runs(monkeypatch):
    moved = tasks.declared_elsewhere.using(backend="default")
    assert moved.get_backend() is task_backends["default"]
    result = moved.enqueue(21)
    # A worker process has not seen .using(): only the module's task, declared for "immediate".
    monkeypatch.delitem(registry._registry, "tests.testapp.tasks.declared_elsewhere")
    assert run_one().result_json == "42"
    fetched = default_task_backend.get_result(result.id)
    assert (fetched.return_value, fetched.backend) == (42, "default")


def test_the_public_path_names_the_backend_of_the_tasks_package():
    # Settings name "jobqueue.backends.JobQueueBackend"; the code lives in jobqueue.tasks.
    assert import_string("jobqueue.backends.JobQueueBackend") is tasks_backend.JobQueueBackend
    assert type(task_backends["default"]) is tasks_backend.JobQueueBackend
    assert JobQueueTask is tasks_options.JobQueueTask


def test_a_task_row_written_before_the_move_still_runs(monkeypatch):
    # A row as jobqueue.backends wrote it: type = the task's module path, payload = args, kwargs,
    # backend alias and run_after. A fresh worker has registered nothing for it.
    job = make_job(
        type="tests.testapp.tasks.add",
        payload={"args": [4], "kwargs": {"b": 5}, "backend": "default", "run_after": None},
    )
    monkeypatch.delitem(registry._registry, "tests.testapp.tasks.add", raising=False)
    with Recorder(task_started, task_finished) as recorder:
        assert run_one().result_json == "9"
    assert [(s["signal"], s["id"]) for s in recorder.seen] == [
        ("started", str(job.id)),
        ("finished", str(job.id)),
    ]
    fetched = default_task_backend.get_result(str(job.id))
    assert (fetched.status, fetched.return_value, fetched.args, fetched.kwargs) == (
        TaskResultStatus.SUCCESSFUL,
        9,
        [4],
        {"b": 5},
    )


def test_a_dedupe_hit_returns_the_live_jobs_current_result():
    first = tasks.charge.enqueue(order_id=8)
    [claimed] = get_store().claim(["default"], "w1", 1, 30.0)
    again = tasks.charge.enqueue(order_id=8)
    assert again.id == first.id == str(claimed.id)
    assert again.status == TaskResultStatus.RUNNING
    assert again.worker_ids == ["w1"]


def test_a_permanent_error_fails_the_task_at_once():
    result = tasks.refuse.enqueue("card declined")
    with Recorder(task_finished) as recorder:
        outcome = run_one()
    assert (outcome.status, outcome.dead_reason) == ("dead", "permanent_error")
    assert [s["status"] for s in recorder.seen] == [TaskResultStatus.FAILED]
    result.refresh()
    assert result.status == TaskResultStatus.FAILED and result.attempts == 1
    assert [e.exception_class_path for e in result.errors] == ["jobqueue.errors.PermanentError"]


# -- Django's API to the letter (issue 20) -------------------------------------------------


def _db_sleep():
    """Let the clocks move on inside the current transaction (PostgreSQL's now() does not)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_sleep(0.002)")


def test_the_result_enqueue_returns_is_the_stored_result():
    result = tasks.add.enqueue(2, b=3)
    assert result == default_task_backend.get_result(result.id)
    later = tasks.add.using(run_after=timezone.now() + timedelta(hours=1), priority=7).enqueue(1, 1)
    assert later == default_task_backend.get_result(later.id)


def test_the_result_enqueued_late_in_an_atomic_block_is_the_stored_result():
    with transaction.atomic():
        _db_sleep()  # the job's enqueue time is the transaction's, not the moment of enqueue
        result = tasks.add.enqueue(2, b=3)
        _db_sleep()
        assert result == default_task_backend.get_result(result.id)
    assert result == default_task_backend.get_result(result.id)


def _differences(returned, read) -> list[str]:
    """Return each field of two ``TaskResult``s (and of their tasks) whose values differ."""
    found = [
        f"{f.name}: {getattr(returned, f.name)!r} != {getattr(read, f.name)!r}"
        for f in fields(returned)
        if f.name != "task" and getattr(returned, f.name) != getattr(read, f.name)
    ]
    if type(returned.task) is not type(read.task):
        return [*found, f"task class: {type(returned.task)} != {type(read.task)}"]
    found += [
        f"task.{f.name}: {getattr(returned.task, f.name)!r} != {getattr(read.task, f.name)!r}"
        for f in fields(returned.task)
        if getattr(returned.task, f.name) != getattr(read.task, f.name)
    ]
    return found


_IN_AN_HOUR = datetime(2031, 5, 6, 7, 8, 9, 123456, tzinfo=ZoneInfo("Europe/Paris"))


@pytest.mark.parametrize(
    ("declared", "options"),
    [
        ("add", {}),
        ("add", {"priority": -40}),
        ("add", {"queue_name": "emails"}),
        ("add", {"run_after": _IN_AN_HOUR}),
        ("declared_elsewhere", {"backend": "default"}),
        ("add", {"max_attempts": 5}),
        ("add", {"timeout": 90}),
        ("add", {"timeout": 2.5}),
        ("add", {"timeout": timedelta(minutes=2)}),
        ("add", {"dedupe_key": "one-key"}),
        ("add", {"dedupe_key": tasks.key_of_arguments}),
        ("add", {"tenant": "acme"}),
        ("add", {"tenant": tasks.key_of_arguments}),
        ("flaky", {"max_attempts": 7, "timeout": 30}),  # takes_context, its own max_attempts
        ("charge", {}),  # dedupe_key and tenant declared as functions (lambdas)
        ("charge", {"max_attempts": 2, "priority": 3, "run_after": _IN_AN_HOUR}),
        (
            "add",
            {
                "priority": 9,
                "queue_name": "tasks",
                "run_after": _IN_AN_HOUR,
                "backend": "default",
                "max_attempts": 4,
                "timeout": timedelta(seconds=45),
                "dedupe_key": tasks.key_of_arguments,
                "tenant": "t9",
            },
        ),
    ],
    ids=lambda value: value if isinstance(value, str) else ",".join(value) or "none",
)
def test_every_option_reads_back_as_enqueued(declared, options):
    task_ = getattr(tasks, declared).using(**options)
    args = {"flaky": ("/nowhere", 1), "charge": (11,)}.get(declared, (1, 2))
    returned = task_.enqueue(*args)
    read = default_task_backend.get_result(returned.id)
    assert _differences(returned, read) == []
    assert returned == read
    assert task_.get_result(returned.id) == returned  # through the task's own backend
    refreshed = replace(returned)
    refreshed.refresh()
    assert _differences(returned, refreshed) == []


@pytest.mark.parametrize("name", ["dedupe_key", "tenant"])
def test_using_refuses_a_function_it_could_not_give_back(name):
    # A job keeps a .using() function by import path: a lambda's would read back as another.
    with pytest.raises(InvalidTask, match=rf"\.using\({name}=\.\.\.\) takes a string or a module"):
        tasks.add.using(**{name: lambda *args: "k"})
    assert Job.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_the_result_enqueued_outside_a_transaction_is_the_stored_result():
    result = tasks.add.enqueue(2, b=3)
    assert result == default_task_backend.get_result(result.id)
    Job.objects.filter(id=int(result.id)).delete()


def test_refresh_changes_only_what_the_worker_changed():
    result = tasks.add.enqueue(2, b=3)
    as_enqueued = replace(result)
    result.refresh()
    assert result == as_enqueued  # nothing ran: nothing changed
    run_one()
    result.refresh()
    assert (result.id, result.task, result.args, result.kwargs, result.backend) == (
        as_enqueued.id,
        as_enqueued.task,
        as_enqueued.args,
        as_enqueued.kwargs,
        as_enqueued.backend,
    )
    assert result.enqueued_at == as_enqueued.enqueued_at
    assert (result.status, result.return_value) == (TaskResultStatus.SUCCESSFUL, 5)


@pytest.mark.parametrize(
    "bad",
    [datetime(2026, 1, 1), {1, 2}, object(), {"nested": [Decimal("1.5")]}],
    ids=["datetime", "set", "object", "nested-decimal"],
)
def test_a_non_json_argument_is_a_type_error_as_in_django(bad):
    with pytest.raises(TypeError):
        tasks.echo.using(backend="immediate").enqueue(bad)  # Django's own backend
    with pytest.raises(TypeError) as raised:
        tasks.echo.enqueue(1, x=bad)
    assert isinstance(raised.value, InvalidPayload)  # and still ours
    assert "kwargs['x']" in str(raised.value)  # it names the argument
    assert not Job.objects.exists()


def test_arguments_are_normalised_stored_and_handed_over_as_django_does():
    args = (b"caf\xc3\xa9", (1, 2), [b"x", {"k": (3,)}], range(2))
    kwargs = {"raw": b"ok", "pair": (4, 5), "nested": {"t": (b"y",)}}
    reference = tasks.echo.using(backend="immediate").enqueue(*args, **kwargs)
    assert reference.status == TaskResultStatus.SUCCESSFUL
    result = tasks.echo.enqueue(*args, **kwargs)
    assert (result.args, result.kwargs) == (reference.args, reference.kwargs)
    job = Job.objects.get(id=int(result.id))
    assert (job.payload["args"], job.payload["kwargs"]) == (reference.args, reference.kwargs)
    assert run_one().status == "succeeded"
    result.refresh()
    assert result.return_value == reference.return_value


def test_bytes_that_are_not_utf_8_are_refused_as_in_django():
    with pytest.raises(ValueError) as reference:
        tasks.echo.using(backend="immediate").enqueue(b"\xff")
    with pytest.raises(ValueError) as raised:
        tasks.echo.enqueue(b"\xff")
    assert type(reference.value) is ValueError
    assert "args[0]" in str(raised.value) and "UTF-8" in str(raised.value)
    assert not Job.objects.exists()


def test_a_return_value_normalised_as_django_does_is_stored():
    reference = tasks.give_back.using(backend="immediate").enqueue("bytes and a tuple")
    result = tasks.give_back.enqueue("bytes and a tuple")
    assert run_one().status == "succeeded"
    result.refresh()
    assert result.return_value == reference.return_value == [1, "café", {"k": [2]}]


@pytest.mark.parametrize("kind", ["a set", "an object", "nan"])
def test_a_return_value_that_is_not_json_fails_the_task_with_a_type_error(kind):
    if kind != "nan":  # Django's immediate backend keeps a NaN; no database column can
        reference = tasks.give_back.using(backend="immediate").enqueue(kind)
        assert reference.status == TaskResultStatus.FAILED
        assert reference.errors[0].exception_class is TypeError
    result = tasks.give_back.enqueue(kind)  # max_attempts 8: a retry would change nothing
    with Recorder(task_finished) as recorder:
        outcome = run_one()
    assert (outcome.status, outcome.dead_reason) == ("dead", "permanent_error")
    assert [s["status"] for s in recorder.seen] == [TaskResultStatus.FAILED]
    result.refresh()
    assert (result.status, result.attempts) == (TaskResultStatus.FAILED, 1)
    [error] = result.errors
    assert error.exception_class is TypeError  # what Django's backends record
    [entry] = Job.objects.get(id=int(result.id)).errors
    assert entry["type"] == "ResultNotJSON"  # the job's own history keeps jobqueue's class
    assert "return value" in entry["message"] and "not JSON" in entry["message"]
    with pytest.raises(ValueError, match="failed"):
        _ = result.return_value


@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("tests.testapp.tasks.renamed_since", 'does not define a "renamed_since"'),
        ("tests.testapp.no_such_module.send", "No module named 'tests.testapp.no_such_module'"),
    ],
    ids=["attribute-gone", "module-gone"],
)
def test_a_task_that_cannot_be_imported_shows_the_import_error(path, says):
    job = make_job(
        type=path,
        max_attempts=1,
        payload={"args": [], "kwargs": {}, "backend": "default", "run_after": None},
    )
    outcome = run_one()
    assert (outcome.status, outcome.dead_reason) == ("dead", "unknown_type")
    [entry] = Job.objects.get(id=job.id).errors
    assert says in entry["message"]  # the worker's log line is "dead (...): type: message"
    assert "ImportError" in entry["traceback"] or "ModuleNotFoundError" in entry["traceback"]
    assert says in entry["traceback"] and "import_string" in entry["traceback"]


def test_an_argument_that_is_not_json_is_refused_in_djangos_words():
    """Django's backends raise normalize_json's TypeError, "Unsupported type: <class ...>"."""
    from datetime import date

    with pytest.raises(TypeError) as reference:
        tasks.echo.using(backend="immediate").enqueue(date(2026, 1, 1))
    with pytest.raises(TypeError) as raised:
        tasks.echo.enqueue(date(2026, 1, 1))
    assert str(reference.value) == "Unsupported type: <class 'datetime.date'>"
    assert "Unsupported type: <class 'datetime.date'>" in str(raised.value)
    assert "args[0]" in str(raised.value)
    assert not Job.objects.exists()
