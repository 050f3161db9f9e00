"""Hand-edited admin URLs and tampered action forms give a normal page, never a 500.

Every jobqueue admin page: a NUL character in any filter (each custom filter of
``jobqueue/admin/filters.py`` and Django's own on the cron, breaker and worker pages), the search
box included, is refused as Django refuses any lookup it cannot run (the ``?e=1`` redirect); and
every action (``admin/actions.py``, ``admin/breakers.py``, ``admin/cron.py``) posted with a
selected value that is no id of the page's model is not run: a message names the value and no row
changes. Before the fix: ``DataError`` (PostgreSQL text cannot hold NUL) and ``ValueError``
(``pk__in=["abc"]``), both 500s. Runs on both stores (SQLite takes NUL; the answer is the same).
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse
from django.utils import timezone

import jobqueue
from jobqueue.limits.breakers import open_breaker
from jobqueue.models import CronEntry, CronFire, DependencyBreaker, Job, Worker
from jobqueue.settings.conf import get_settings
from jobqueue.states import JobState
from jobqueue.store import get_store
from tests.factories import make_job

pytestmark = pytest.mark.django_db

NOOP = "tests.testapp.jobs.noop"

#: Each page and the query parameters its filters (and search box) read.
FILTERS = {
    "job": ["state", "queue", "type", "tenant", "tenant_id", "q"],
    "deadletter": ["reason", "queue", "type", "tenant", "q"],
    "worker": ["status", "host", "q"],
    "cronentry": ["enabled", "source", "missed", "queue", "q"],
    "dependencybreaker": ["state", "q"],
    "retrybudget": ["q"],
}

#: Each page's actions.
ACTIONS = {
    "job": ["cancel_jobs", "retry_jobs", "run_jobs_now"],
    "deadletter": ["cancel_jobs", "retry_jobs"],
    "cronentry": ["enable", "disable", "run_now"],
    "dependencybreaker": ["open_selected", "close_selected"],
}

#: Not ids: text, a Unicode digit (``"²".isdigit()`` is True, ``int("²")`` fails), a NUL, and a
#: number over bigint.
BAD_IDS = ["abc", "²", "7\x00", "99999999999999999999999"]


def changelist(model: str) -> str:
    return reverse(f"admin:jobqueue_{model}_changelist")


@pytest.fixture
def admin() -> Client:
    client = Client()
    client.force_login(User.objects.create(username="ops", is_staff=True, is_superuser=True))
    return client


@pytest.fixture
def rows() -> dict[str, int]:
    """One row each action could act on, per page: returns the page's model -> a valid pk."""
    ready = make_job(JobState.READY)
    make_job(JobState.SCHEDULED, run_at=timezone.now() + timedelta(hours=1))
    dead = make_job(JobState.DEAD)
    entry = jobqueue.schedule("a", "0 3 * * *", "q", NOOP)
    jobqueue.schedule("b", "0 4 * * *", "q", NOOP, enabled=False)
    open_breaker("partner", 60, reason="test")
    get_store().open_breaker("billing", 1, "x", get_settings().breaker)
    get_store().close_breaker("billing", "recovered", get_settings().breaker)
    return {
        "job": ready.pk,
        "deadletter": dead.pk,
        "cronentry": entry.pk,
        "dependencybreaker": DependencyBreaker.objects.get(name="billing").pk,
    }


def snapshot() -> dict[str, list[dict]]:
    """Every row an action could write."""
    return {
        model.__name__: list(model.objects.order_by("pk").values())
        for model in (Job, CronEntry, CronFire, DependencyBreaker, Worker)
    }


@pytest.mark.parametrize(
    ("model", "param"), [(m, p) for m, params in FILTERS.items() for p in params]
)
def test_a_nul_in_any_filter_or_the_search_is_an_invalid_lookup_not_a_500(admin, model, param):
    make_job(JobState.READY)
    response = admin.get(changelist(model), {param: "x\x00"})
    assert response.status_code == 302
    assert response["Location"] == f"{changelist(model)}?e=1"
    assert admin.get(response["Location"]).status_code == 200


@pytest.mark.parametrize("confirmed", [False, True], ids=["first-post", "confirmed"])
@pytest.mark.parametrize(
    ("model", "action"), [(m, a) for m, actions in ACTIONS.items() for a in actions]
)
def test_an_action_on_a_value_that_is_no_id_changes_nothing_and_says_which(
    admin, rows, model, action, confirmed
):
    before = snapshot()
    data = {"action": action, "index": "0", "_selected_action": [rows[model], *BAD_IDS]}
    if confirmed:
        data["post"] = "yes"
    response = admin.post(changelist(model), data)
    assert response.status_code == 302
    said = [str(m) for m in get_messages(response.wsgi_request)]
    assert len(said) == 1 and said[0].startswith("Nothing was changed: not an id of a "), said
    for value in BAD_IDS:
        assert repr(value) in said[0]
    assert snapshot() == before


def test_a_tampered_confirmation_form_changes_nothing_and_says_which(admin, rows):
    before = snapshot()
    response = admin.post(
        changelist("job"),
        {
            "action": "cancel_jobs",
            "index": "0",
            "_selected_action": [rows["job"]],
            "post": "yes",
            "jq_confirmed_ids": f"{rows['job']},²",
        },
    )
    assert response.status_code == 302
    said = [str(m) for m in get_messages(response.wsgi_request)]
    assert said == ["Nothing was changed: not a job id: '²'."]
    assert snapshot() == before
