"""A job's concurrency key and limit, fixed at enqueue (issue 18; jobqueue/limits/concurrency.py).

Every path stores the key and the limit on the row, which is what the claim reads; bad input is
refused with the option named and nothing written.
"""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

import jobqueue
from jobqueue import job
from jobqueue.errors import InvalidJobOption
from jobqueue.models import Job
from jobqueue.settings.conf import build_settings
from tests.testapp.limited_jobs import bad_key, maybe_regional, per_account, per_type

db = pytest.mark.django_db(databases=["default", "sqlite"])
PARTNER = "tests.testapp.limited_jobs.partner_call"


def stored(job_id: int, using: str = "default") -> tuple[str | None, int | None]:
    job_row = Job.objects.using(using).get(id=job_id)
    return job_row.concurrency_key, job_row.concurrency_limit


@db
@pytest.mark.parametrize("using", ["default", "sqlite"])
def test_the_type_computes_its_key_from_the_payload(using):
    job_id = per_account.enqueue(account_id=42, using=using)
    assert stored(job_id, using) == ("acct:42", 2)


@db
def test_a_key_function_returning_none_leaves_the_job_unlimited():
    assert stored(maybe_regional.enqueue()) == (None, None)
    assert stored(maybe_regional.enqueue(region="eu")) == ("region:eu", 1)


@db
def test_a_limit_without_a_key_limits_the_type():
    assert stored(per_type.enqueue()) == ("type:tests.testapp.limited_jobs.per_type", 3)


@db
def test_enqueue_many_stores_key_and_limit_per_job():
    ids = jobqueue.enqueue_many(
        [
            {"job_type": per_account, "queue": "q", "payload": {"account_id": 1}},
            {"job_type": per_account, "queue": "q", "payload": {"account_id": 2}},
            {"job_type": PARTNER, "queue": "q", "concurrency_key": "x", "concurrency_limit": 4},
        ]
    )
    assert [stored(i) for i in ids] == [("acct:1", 2), ("acct:2", 2), ("x", 4)]


@db
@override_settings(JOBQUEUE={"CONCURRENCY_LIMITS": {"dependency:partner-api": 5}})
def test_a_dependency_listed_in_settings_limits_every_type_that_calls_it():
    assert stored(jobqueue.enqueue("q", PARTNER)) == ("dependency:partner-api", 5)


@db
@override_settings(JOBQUEUE={"CONCURRENCY_LIMITS": {"acct:7": 1}})
def test_the_settings_limit_wins_over_the_type_and_the_call():
    assert stored(per_account.enqueue(account_id=7)) == ("acct:7", 1)
    assert stored(per_account.enqueue(account_id=8)) == ("acct:8", 2)
    job_id = jobqueue.enqueue("q", PARTNER, concurrency_key="acct:7", concurrency_limit=9)
    assert stored(job_id) == ("acct:7", 1)


@db
def test_enqueue_takes_a_key_and_limit_directly():
    job_id = jobqueue.enqueue("q", PARTNER, concurrency_key="mail", concurrency_limit=3)
    assert stored(job_id) == ("mail", 3)
    assert stored(per_account.enqueue(account_id=1, concurrency_key="shared")) == ("shared", 2)


@db
@pytest.mark.parametrize(
    ("kwargs", "option", "words"),
    [
        ({"concurrency_key": "mail"}, "concurrency_key", "'mail' has no limit"),
        ({"concurrency_key": "", "concurrency_limit": 1}, "concurrency_key", "non-empty"),
        ({"concurrency_key": "x" * 201, "concurrency_limit": 1}, "concurrency_key", "200"),
        ({"concurrency_key": "k", "concurrency_limit": 0}, "concurrency_limit", "1..1,000,000"),
        ({"concurrency_key": "k", "concurrency_limit": True}, "concurrency_limit", "True"),
        ({"concurrency_limit": 2}, "concurrency_limit", "needs a concurrency_key"),
    ],
)
def test_bad_key_or_limit_is_refused_by_name_and_nothing_written(kwargs, option, words):
    with pytest.raises(InvalidJobOption) as info:
        jobqueue.enqueue("q", PARTNER, **kwargs)
    assert info.value.option == option and words in str(info.value)
    assert not Job.objects.exists()


@db
@pytest.mark.parametrize(
    ("n", "words"),
    [
        (0, "bad_key's concurrency_key function failed on this payload: ZeroDivisionError"),
        (5, "bad_key's concurrency_key function must return a non-empty string"),
    ],
)
def test_a_key_function_that_fails_or_returns_no_key_is_refused(n, words):
    with pytest.raises(InvalidJobOption) as info:
        bad_key.enqueue(n=n)
    assert info.value.option == "concurrency_key" and words in str(info.value)
    assert not Job.objects.exists()


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        (
            {"concurrency_key": lambda **_: "k"},
            "a concurrency_key function needs a concurrency_limit",
        ),
        ({"concurrency_limit": 0}, "concurrency_limit must be an integer in 1..1,000,000, got 0"),
        ({"concurrency_key": "", "concurrency_limit": 1}, "concurrency_key must be a non-empty"),
    ],
)
def test_bad_job_declarations_are_refused_by_name(kwargs, words):
    with pytest.raises(ImproperlyConfigured) as info:
        job(name="tests.limits.bad", **kwargs)(lambda **_: None)
    assert words in str(info.value) and "@job for tests.limits.bad" in str(info.value)


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        ({"CONCURRENCY_LIMITS": ["a"]}, "must be a dict of concurrency key"),
        ({"CONCURRENCY_LIMITS": {"": 1}}, "keys are non-empty strings"),
        ({"CONCURRENCY_LIMITS": {"a": 0}}, "['a'] must be an integer in 1..1,000,000, got 0"),
        ({"CONCURRENCY_LIMITS": {"a": 2.0}}, "got 2.0"),
        ({"TENANT_WEIGHTS": 5}, "must be a dict of tenant id -> weight"),
        ({"TENANT_WEIGHTS": {"a": 0}}, "['a'] must be a number in (0, 1000], got 0"),
        ({"TENANT_WEIGHTS": {"a": 1001}}, "got 1001"),
        ({"TENANT_WEIGHTS": {"a": float("nan")}}, "got nan"),
        ({"TENANT_WEIGHTS": {1: 2}}, "tenant ids are strings"),
    ],
)
def test_bad_settings_are_refused_by_name(raw, words):
    with pytest.raises(ImproperlyConfigured) as info:
        build_settings(raw)
    assert words in str(info.value)


def test_good_settings_are_read():
    conf = build_settings(
        {"CONCURRENCY_LIMITS": {"dependency:partner-api": 5}, "TENANT_WEIGHTS": {"ent": 5}}
    )
    assert dict(conf.concurrency_limits) == {"dependency:partner-api": 5}
    assert dict(conf.tenant_weights) == {"ent": 5.0}
