"""Jobs that run after other jobs (issue 19, "dependencies"), on both stores.

``enqueue(..., after=[...])`` waits (state ``waiting``, never claimed) until every parent has
succeeded, in the transaction of the last parent's ack; a dead or cancelled parent cancels its
dependants (transitively) with an entry naming it, unless they run anyway; an operator retry of
the parent makes them wait again. ``jobqueue.chain`` and ``takes_parent_results`` sit on top.
The real-process half (two workers, concurrent parents, a chain whose parent dies and is
retried) is in test_process_parents.py.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

import jobqueue
from jobqueue.errors import InvalidJobOption
from jobqueue.models import Job
from jobqueue.states import JobState
from jobqueue.store import get_store
from jobqueue.store.finishing import ack_outcome
from tests.conftest import requires_postgres
from tests.jobqueue_cli import cli
from tests.store.contract_parents import state_of
from tests.testapp import jobs


@pytest.mark.django_db
def test_the_job_pages_show_parents_children_and_the_waiting_state(admin_client):
    parent = jobqueue.enqueue("p12", jobs.noop)
    child = jobqueue.enqueue("p12", jobs.noop, after=[parent])
    page = admin_client.get(reverse("admin:jobqueue_job_change", args=[parent])).content.decode()
    assert "Runs before" in page
    assert f'href="{reverse("admin:jobqueue_job_change", args=[child])}"' in page
    assert "jq-state-waiting" in page
    page = admin_client.get(reverse("admin:jobqueue_job_change", args=[child])).content.decode()
    assert f'href="{reverse("admin:jobqueue_job_change", args=[parent])}"' in page
    listed = admin_client.get(reverse("admin:jobqueue_job_changelist") + "?state=waiting")
    assert listed.status_code == 200
    assert f"#{child}" in listed.content.decode() or f">{child}<" in listed.content.decode()


@pytest.mark.django_db(transaction=True)
def test_jobqueue_show_lists_parents_children_and_what_a_job_waits_for():
    parents = [jobqueue.enqueue("p13", jobs.noop) for _ in range(2)]
    child = jobqueue.enqueue("p13", jobs.noop, after=parents)
    shown = cli("show", str(child), "--json").json()
    assert (shown["stored_state"], shown["after"], shown["waiting_for"]) == (
        "waiting",
        parents,
        2,
    )
    assert cli("show", str(parents[0]), "--json").json()["before"] == [child]
    listed = cli("jobs", "--state", "waiting", "--json").json()
    assert [row["id"] for row in listed] == [child]


@requires_postgres()
@pytest.mark.django_db(transaction=True)
def test_an_ack_is_one_statement_with_or_without_children_and_releases_in_it():
    store = get_store("default")
    plain = jobqueue.enqueue("p14", jobs.noop)
    parent = jobqueue.enqueue("p14", jobs.noop)
    child = jobqueue.enqueue("p14", jobs.noop, after=[parent])
    claimed = {c.id: c for c in store.claim(["p14"], "w1", 10, 30.0)}
    for job_id in (plain, parent):
        with CaptureQueriesContext(connection) as queries:
            store.finish_many([ack_outcome(job_id, claimed[job_id].lease_token, "null")])
        assert len(queries) == 1, [q["sql"][:80] for q in queries]
    assert state_of(child, "default") == JobState.READY


def test_after_with_a_dedupe_key_is_refused_naming_why():
    # A documented decision (docs/decisions.md, "Jobs that run after other jobs"): the message
    # says why, and what to do instead, not only "not supported".
    with pytest.raises(InvalidJobOption) as refused:
        jobqueue.enqueue("p20", jobs.noop, after=[1], dedupe_key="nightly")
    assert refused.value.option == "dedupe_key"
    message = str(refused.value)
    assert "waiting job holds no dedupe key" in message
    assert "dedupe the parent" in message


@pytest.mark.django_db
def test_a_chain_step_of_an_unregistered_type_without_a_queue_is_refused_naming_the_type():
    with pytest.raises(InvalidJobOption) as refused:
        jobqueue.chain(jobs.noop.step(queue="p21"), jobqueue.step("tests.testapp.jobs.nope", {}))
    assert refused.value.option == "steps[1].job_type"
    assert "'tests.testapp.jobs.nope' is not registered here" in str(refused.value)
    assert "queue=" in str(refused.value)  # what to do
    assert not Job.objects.filter(queue="p21").exists()
