"""Batches (issue 19): ``jobqueue.batch`` and ``jobqueue.batch_status`` on both stores.

Members commit with the caller's transaction; the callback is enqueued by the database in the
statement that records the last outcome (migration 0016_batches's row trigger), with the counts;
on_success only when every member succeeded; an empty batch completes at the end of its block;
an operator retry of a member reopens the batch and its next completion fires again. The
concurrent and SIGKILL trials are in test_batches_concurrent.py and test_process_batches.py.
"""

from __future__ import annotations

from datetime import datetime

import pytest
from django.urls import reverse

import jobqueue
from tests.jobqueue_cli import cli
from tests.store.contract_batches import REPORT, members

BOTH = pytest.mark.django_db(databases=["default", "sqlite"], transaction=True)


@pytest.mark.django_db(transaction=True)
def test_cli_batch_prints_the_counts_and_exits_1_for_a_missing_batch():
    with jobqueue.batch(on_complete=REPORT) as b:
        b.enqueue_many(members(2))
    [claimed, other] = jobqueue.claim("bq", "w1", 2)
    jobqueue.ack(claimed.id, claimed.lease_token, 1)

    data = cli("batch", str(b.id), "--json").json()
    assert {k: data[k] for k in ("id", "total", "pending", "succeeded", "done")} == {
        "id": b.id,
        "total": 2,
        "pending": 1,
        "succeeded": 1,
        "done": False,
    }
    assert data["completed_at"] is None
    jobqueue.ack(other.id, other.lease_token, 1)
    done = cli("batch", str(b.id), "--json").json()
    assert done["done"] is True
    # ISO 8601 as the other --json outputs write datetimes (it was str(): a space, no 'T').
    assert "T" in done["completed_at"]
    assert datetime.fromisoformat(done["completed_at"]).utcoffset() is not None
    table = cli("batch", str(b.id))
    assert table.returncode == 0 and "pending" in table.stdout
    missing = cli("batch", "999999999")
    assert missing.returncode == 1 and "No batch with id 999999999" in missing.stderr


@pytest.mark.django_db(transaction=True)
def test_admin_lists_batches_with_counts_and_links_members_and_callbacks(admin_client):
    with jobqueue.batch(on_complete=REPORT) as b:
        [first, second] = b.enqueue_many(members(2))
    for claimed in jobqueue.claim("bq", "w1", 2):
        jobqueue.ack(claimed.id, claimed.lease_token, 1)
    status = jobqueue.batch_status(b.id)

    listing = admin_client.get(reverse("admin:jobqueue_batch_changelist"))
    assert listing.status_code == 200
    page = admin_client.get(reverse("admin:jobqueue_batch_change", args=[b.id]))
    assert page.status_code == 200
    members_url = f"{reverse('admin:jobqueue_job_changelist')}?batch_id={b.id}"
    html = page.content.decode()
    assert members_url in html and "2 members" in html
    assert reverse("admin:jobqueue_job_change", args=[status.complete_job_id]) in html

    # The members link lists exactly the members.
    members_page = admin_client.get(members_url)
    assert members_page.status_code == 200
    assert [job.id for job in members_page.context["cl"].result_list] == [second, first]
    # A member's page links back to its batch.
    job_page = admin_client.get(reverse("admin:jobqueue_job_change", args=[first]))
    assert reverse("admin:jobqueue_batch_change", args=[b.id]) in job_page.content.decode()
    # Read-only: nothing to add.
    assert admin_client.get(reverse("admin:jobqueue_batch_add")).status_code == 403
