"""A job type's ``@job`` defaults apply however a job of it is enqueued; an explicit option wins.

DESIGN.md: "Type defaults (@job(max_attempts=..., timeout_s=..., priority=..., queue=...)) apply
however a job of that type is enqueued". Each test below is one path; every one asserts the
stored row, which is what the worker runs by (a 35 s job under a 30 s timeout is cut short and
run again).
"""

from __future__ import annotations

import sys

import pytest
from django.test import override_settings

import jobqueue
from jobqueue import cron
from jobqueue.errors import InvalidJobOption
from jobqueue.models import Job
from tests.testapp.typed_jobs import typed

db = pytest.mark.django_db(databases=["default", "sqlite"])

TYPED = "tests.testapp.typed_jobs.typed"
# The defaults @job gave it: queue "typed", priority 7, max_attempts 3, timeout_s 60.
TYPED_ROW = (7, 3, 60.0)
SETTINGS = {"MAX_ATTEMPTS": 8, "TIMEOUT_SECONDS": 30}


def stored(job_id: int) -> tuple:
    job = Job.objects.get(id=job_id)
    return (job.queue, job.priority, job.max_attempts, job.timeout_s)


@db
@override_settings(JOBQUEUE=SETTINGS)
@pytest.mark.parametrize("using", ["default", "sqlite"])
def test_enqueue_by_type_name_takes_the_type_defaults(using):
    job_id = jobqueue.enqueue("q", TYPED, {}, using=using)
    assert Job.objects.using(using).values_list(
        "queue", "priority", "max_attempts", "timeout_s"
    ).get(id=job_id) == ("q", *TYPED_ROW)


@db
@override_settings(JOBQUEUE=SETTINGS)
def test_enqueue_by_object_and_by_the_types_own_enqueue_take_the_defaults():
    assert stored(jobqueue.enqueue("q", typed, {})) == ("q", *TYPED_ROW)
    assert stored(typed.enqueue()) == ("typed", *TYPED_ROW)


@db
@override_settings(JOBQUEUE=SETTINGS)
def test_an_explicit_option_wins_over_the_type_default_on_every_path():
    explicit = {"priority": -1, "max_attempts": 5, "timeout_s": 10}
    assert stored(jobqueue.enqueue("q", TYPED, {}, **explicit)) == ("q", -1, 5, 10.0)
    assert stored(jobqueue.enqueue("q", typed, {}, **explicit)) == ("q", -1, 5, 10.0)
    assert stored(typed.enqueue(queue="other", **explicit)) == ("other", -1, 5, 10.0)
    [job_id] = jobqueue.enqueue_many([{"queue": "q", "job_type": TYPED, **explicit}])
    assert stored(job_id) == ("q", -1, 5, 10.0)


@db
@override_settings(JOBQUEUE=SETTINGS)
def test_enqueue_many_takes_the_type_defaults_by_name_and_object_and_its_queue_when_left_out():
    ids = jobqueue.enqueue_many(
        [
            {"queue": "q", "job_type": TYPED},
            {"queue": "q", "job_type": typed},
            {"job_type": TYPED},
            {"queue": "q", "job_type": TYPED, "max_attempts": 1},
        ]
    )
    assert [stored(i) for i in ids] == [
        ("q", *TYPED_ROW),
        ("q", *TYPED_ROW),
        ("typed", *TYPED_ROW),
        ("q", 7, 1, 60.0),
    ]


@db
def test_enqueue_many_without_a_queue_needs_a_registered_type():
    with pytest.raises(InvalidJobOption) as excinfo:
        jobqueue.enqueue_many([{"job_type": "other.service.jobs.unknown"}])
    assert excinfo.value.option == "jobs[0].queue"
    assert Job.objects.count() == 0


@db
@override_settings(JOBQUEUE=SETTINGS)
def test_a_type_whose_module_is_not_imported_yet_is_imported_for_its_defaults():
    module = "tests.testapp.lazy_typed_jobs"
    sys.modules.pop(module, None)
    job_id = jobqueue.enqueue("q", f"{module}.lazy", {})
    assert module in sys.modules
    assert stored(job_id) == ("q", -3, 2, 45.0)


@db
@override_settings(JOBQUEUE={**SETTINGS, "ENQUEUE_UNREGISTERED": ["other.service."]})
def test_a_type_unknown_here_gets_the_settings():
    # Another service's handler: nothing to import, nothing to check; the settings apply.
    assert stored(jobqueue.enqueue("q", "other.service.jobs.unknown", {"x": 1})) == (
        "q",
        0,
        8,
        30.0,
    )


@db
@override_settings(JOBQUEUE=SETTINGS)
def test_a_cron_fire_takes_the_type_defaults_and_the_entrys_queue_and_priority():
    jobqueue.schedule("typed-nightly", "0 3 * * *", "reports", TYPED, {}, priority=2)
    job_id = cron.run_now("typed-nightly")
    # The entry's queue and priority are its own options; attempts and timeout are the type's.
    assert stored(job_id) == ("reports", 2, 3, 60.0)
