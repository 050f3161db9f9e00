"""Enqueue refuses a job type nothing registers in this process, unless the settings allow it.

Issue 17, "silent failures first": such a job used to be accepted and retried until dead
(``unknown_type``). Every enqueue path asks :func:`jobqueue.options.enqueue_type`. The test
settings allow any name (``ENQUEUE_UNREGISTERED: True``, for the tests that enqueue made-up
types on purpose); the tests here override ``JOBQUEUE`` to run with the default.
"""

from __future__ import annotations

import sys

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

import jobqueue
from jobqueue import checks, cron
from jobqueue.client import JobFunction
from jobqueue.errors import InvalidJobOption, UnknownJobType, UnregisteredJobType
from jobqueue.models import Job
from jobqueue.registry import JobType
from jobqueue.settings.conf import build_settings

db = pytest.mark.django_db(databases=["default", "sqlite"])
both_stores = pytest.mark.parametrize("using", ["default", "sqlite"])

ADD = "tests.testapp.jobs.add"
OTHER = "billing.jobs.charge"  # another service's type: nothing here defines it
DEFAULT = override_settings(JOBQUEUE={})


def handler(**kwargs):
    return kwargs


def unregistered(cls: type[JobType] = JobType) -> JobType:
    # Built as @job would, but never registered (a module-level name nothing imports).
    return cls(
        handler,
        name="tests.client.test_unregistered_types.never_registered",
        queue="q",
        priority=0,
        max_attempts=None,
        timeout_s=None,
        backoff=None,
        takes_context=False,
    )


@db
@DEFAULT
@both_stores
def test_enqueue_by_name_of_an_unregistered_type_is_refused(using):
    with pytest.raises(UnregisteredJobType) as raised:
        jobqueue.enqueue("q", OTHER, {"amount": 1}, using=using)
    message = str(raised.value)
    assert OTHER in message
    assert "@job" in message and "ENQUEUE_UNREGISTERED" in message and "'billing.jobs.'" in message
    assert raised.value.job_type == OTHER and raised.value.option == "job_type"
    # Callers that caught either family before still do.
    assert isinstance(raised.value, UnknownJobType) and isinstance(raised.value, InvalidJobOption)
    assert not Job.objects.using(using).exists()


@db
@DEFAULT
def test_enqueue_many_refuses_and_names_the_job_nothing_written():
    jobs = [{"queue": "q", "job_type": ADD, "payload": {"a": 1, "b": 2}}, {"job_type": OTHER}]
    with pytest.raises(UnregisteredJobType) as raised:
        jobqueue.enqueue_many(jobs)
    assert raised.value.option == "jobs[1].job_type"
    assert raised.value.job_type == OTHER
    assert "jobs[1].job_type" in str(raised.value)
    assert not Job.objects.exists()


@db
@DEFAULT
def test_a_job_type_object_never_registered_is_refused():
    with pytest.raises(UnregisteredJobType, match="never_registered"):
        jobqueue.enqueue("q", unregistered(), {})
    with pytest.raises(UnregisteredJobType, match="never_registered"):
        unregistered(JobFunction).enqueue(x=1)  # type: ignore[attr-defined]
    assert not Job.objects.exists()


@db
@DEFAULT
def test_registered_types_enqueue_by_name_and_by_object():
    from tests.testapp.jobs import add

    by_name = jobqueue.enqueue("q", ADD, {"a": 1, "b": 2})
    by_object = add.enqueue(a=1, b=2)
    assert set(Job.objects.values_list("id", "type")) == {(by_name, ADD), (by_object, ADD)}


@db
@pytest.mark.parametrize("allowed", [True, ["billing."], ["billing.jobs.charge"]])
def test_the_setting_allows_unregistered_types(allowed):
    with override_settings(JOBQUEUE={"ENQUEUE_UNREGISTERED": allowed}):
        job_id = jobqueue.enqueue("q", OTHER, {"amount": 1})
        [many] = jobqueue.enqueue_many([{"queue": "q", "job_type": OTHER}])
        by_object = jobqueue.enqueue("q", unregistered(), {}) if allowed is True else None
    assert Job.objects.get(id=job_id).type == OTHER
    assert Job.objects.get(id=many).type == OTHER
    if by_object is not None:
        assert Job.objects.get(id=by_object).queue == "q"


@db
def test_a_prefix_allows_only_the_names_it_starts():
    with override_settings(JOBQUEUE={"ENQUEUE_UNREGISTERED": ["shipping."]}):
        with pytest.raises(UnregisteredJobType):
            jobqueue.enqueue("q", OTHER, {})
    assert not Job.objects.exists()


@db
@DEFAULT
def test_a_cron_fire_of_an_unregistered_type_is_refused_and_allowed_under_the_setting():
    jobqueue.schedule("charge-nightly", "0 3 * * *", "q", OTHER, {})
    with pytest.raises(UnregisteredJobType):
        cron.run_now("charge-nightly")
    assert not Job.objects.exists()
    with override_settings(JOBQUEUE={"ENQUEUE_UNREGISTERED": ["billing."]}):
        job_id = cron.run_now("charge-nightly")
    assert Job.objects.get(id=job_id).type == OTHER


@pytest.mark.skipif("django.tasks" not in sys.modules, reason="django.tasks is Django 6.0+")
@db
@DEFAULT
def test_a_django_task_enqueues_under_the_default():
    from tests.testapp.tasks import add

    result = add.enqueue(2, 3)
    assert Job.objects.filter(id=int(result.id)).exists()


@pytest.mark.skipif("django.tasks" not in sys.modules, reason="django.tasks is Django 6.0+")
@db
@DEFAULT
def test_a_task_of_another_backend_moved_onto_jobqueue_enqueues_under_the_default():
    # Its module registered nothing with jobqueue; the backend registers it as it validates it.
    from tests.testapp.tasks import declared_elsewhere

    result = declared_elsewhere.using(backend="default").enqueue(4)
    assert Job.objects.get(id=int(result.id)).type == "tests.testapp.tasks.declared_elsewhere"


@pytest.mark.parametrize("bad", ["billing.", [""], [3], {"billing.": True}, None])
def test_a_bad_setting_names_the_key(bad):
    with pytest.raises(ImproperlyConfigured, match="ENQUEUE_UNREGISTERED"):
        build_settings({"ENQUEUE_UNREGISTERED": bad})


def test_the_setting_parses_to_prefixes():
    assert build_settings({}).enqueue_unregistered == ()
    assert build_settings({"ENQUEUE_UNREGISTERED": False}).enqueue_unregistered == ()
    assert build_settings({"ENQUEUE_UNREGISTERED": True}).enqueue_unregistered == ("",)
    assert build_settings({"ENQUEUE_UNREGISTERED": ["a.", "b."]}).enqueue_unregistered == (
        "a.",
        "b.",
    )


# -- manage.py check ------------------------------------------------------------------------


def ids(messages) -> list[str]:
    return [m.id for m in messages]


def test_allowing_every_name_is_w004():
    with override_settings(JOBQUEUE={"ENQUEUE_UNREGISTERED": True}):
        [message] = checks.check_enqueue_unregistered()
    assert message.id == "jobqueue.W004"
    assert "ENQUEUE_UNREGISTERED" in message.msg and "billing." in message.hint


@pytest.mark.parametrize("setting", [{}, {"ENQUEUE_UNREGISTERED": ["billing."]}])
def test_the_default_and_a_prefix_list_are_silent(setting):
    with override_settings(JOBQUEUE=setting):
        assert checks.check_enqueue_unregistered() == []


def test_a_cron_entry_of_an_allowed_type_is_not_e004_and_an_unknown_one_is():
    cron_setting = {
        "charge": {"cron_expr": "0 3 * * *", "queue": "q", "job_type": OTHER},
        "typo": {"cron_expr": "0 3 * * *", "queue": "q", "job_type": "tests.testapp.jobs.no_such"},
    }
    with override_settings(JOBQUEUE={"CRON": cron_setting, "ENQUEUE_UNREGISTERED": ["billing."]}):
        messages = checks.check_job_types()
    assert ids(messages) == ["jobqueue.E004"]
    assert "no_such" in messages[0].msg
    with override_settings(JOBQUEUE={"CRON": cron_setting}):
        assert ids(checks.check_job_types()) == ["jobqueue.E004", "jobqueue.E004"]
