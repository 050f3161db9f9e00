"""The dashboard flags a queue whose ready jobs no live worker serves (issue 17, silent failures).

A job enqueued on a mistyped queue waits forever; the dashboard says so on the queue's row, with
how long it has waited, instead of showing only a growing lag.
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from jobqueue.models import Worker
from jobqueue.states import JobState
from tests.factories import make_job

pytestmark = pytest.mark.django_db

DASHBOARD = reverse("admin:jobqueue_dashboard")


def row(page: str, queue: str) -> str:
    found = re.search(rf'<tr data-queue="{re.escape(queue)}">(.*?)</tr>', page, re.S)
    assert found, f"no row for queue {queue!r}"
    return found[1]


def test_a_queue_with_ready_jobs_and_no_live_worker_is_flagged_unserved(admin_client):
    now = timezone.now()
    make_job(queue="emails", run_at=now - timedelta(minutes=3))
    make_job(queue="emial", run_at=now - timedelta(minutes=20))
    make_job(JobState.SCHEDULED, queue="later")  # nothing ready: nothing to flag
    Worker.objects.create(worker_id="w1", host="h", pid=1, concurrency=1, queues=["emails"])
    # Silent for two hours: it serves nothing any more.
    Worker.objects.create(
        worker_id="w2",
        host="h",
        pid=2,
        concurrency=1,
        queues=["emial"],
        last_seen_at=now - timedelta(hours=2),
    )
    page = admin_client.get(DASHBOARD).content.decode()
    assert "unserved" not in row(page, "emails")
    assert "unserved" not in row(page, "later")
    typo = row(page, "emial")
    assert re.search(r'jq-lag">20 min <strong class="jq-alert"[^>]*>unserved</strong>', typo)
