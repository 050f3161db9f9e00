"""Results (issue 19): ``jobqueue.status``, ``jobqueue.result`` and ``jobqueue.wait``, on both
stores; progress and checkpoints fenced by the lease token (a zombie writes nothing).

The real-process half (a 200-step job killed with SIGKILL resumes from its checkpoint) is in
test_process_checkpoints.py.
"""

from __future__ import annotations

import threading

import psycopg
import pytest
from django.db import connections
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

import jobqueue
from jobqueue.models import Job
from jobqueue.store import get_store
from jobqueue.store.finishing import ack_outcome
from tests.conftest import database_url, requires_postgres, wait_for
from tests.factories import make_job
from tests.jobqueue_cli import cli
from tests.store.contract_results import context_of

BOTH = pytest.mark.django_db(databases=["default", "sqlite"], transaction=True)


@requires_postgres()
@pytest.mark.django_db(transaction=True)
def test_wait_sleeps_on_listen_and_is_woken_by_the_finish_without_reading_the_table():
    """With a safety read only every hour, only the notification can end the wait in time.

    The waiting thread runs 2 statements in all: the watch, and one read of the finished row
    (state and result together) once it was notified; not one per poll, not the row twice.
    """
    store = get_store("default")
    job = make_job(queue="wake")
    got: list = []
    counted: list[int] = []

    def waiter():
        with CaptureQueriesContext(connections["default"]) as queries:
            got.append(jobqueue.wait(job.id, timeout=120, poll_s=3600))
        counted.append(len(queries))
        connections.close_all()

    thread = threading.Thread(target=waiter)
    thread.start()
    wait_for(lambda: Job.objects.filter(id=job.id, watched=True).exists())
    [claimed] = store.claim(["wake"], "w1", 1, 30.0)
    store.finish_many([ack_outcome(job.id, claimed.lease_token, '"done"')])
    thread.join(60)
    assert not thread.is_alive(), "wait was not woken by the finish"
    assert [r.result for r in got] == ["done"]
    assert counted == [2]


@requires_postgres()
@pytest.mark.django_db(transaction=True)
def test_finishing_an_unwatched_job_sends_no_notification():
    """The finish path of jobs nobody waits on pays no NOTIFY (the drain's cost stays)."""
    store = get_store("default")
    watched, unwatched = make_job(queue="quiet"), make_job(queue="quiet")
    assert store.watch(watched.id) == "ready"
    with psycopg.connect(database_url(), autocommit=True) as conn:
        conn.execute("LISTEN jobqueue_finished")
        claimed = store.claim(["quiet"], "w1", 2, 30.0)
        store.finish_many([ack_outcome(c.id, c.lease_token, "null") for c in claimed])
        payloads = [n.payload for n in conn.notifies(timeout=1.0, stop_after=5)]
    assert payloads == [str(watched.id)]
    assert unwatched.id not in {int(p) for p in payloads}


@pytest.mark.django_db(transaction=True)
def test_progress_and_checkpoint_show_in_the_cli_and_the_admin_job_page(admin_client):
    store = get_store("default")
    job = make_job(queue="shown")
    [claimed] = store.claim(["shown"], "w1", 1, 30.0)
    context = context_of(claimed, store)
    context.progress(40, 200)
    context.checkpoint({"next": 40, "cursor": "row-0040"})
    shown = cli("show", str(job.id))
    assert shown.returncode == 0, shown
    assert "40 of 200 (20%)" in shown.stdout and "row-0040" in shown.stdout
    data = cli("show", str(job.id), "--json").json()
    assert (data["progress"], data["checkpoint"]) == (
        "40 of 200 (20%)",
        {"next": 40, "cursor": "row-0040"},
    )
    page = admin_client.get(reverse("admin:jobqueue_job_change", args=[job.id]))
    assert page.status_code == 200
    text = page.content.decode()
    assert "40 of 200 (20%)" in text and "row-0040" in text
