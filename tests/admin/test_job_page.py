"""The job page and lists through Django's test client: the timeline with its durations, every
time to the second with its zone, and no field shown that has no value.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

import pytest
from django.urls import reverse

from jobqueue.states import DeadReason, JobState
from tests.admin.test_cron import text  # admin_client: pytest-django's own (a superuser)
from tests.factories import error_entry, make_job

# datetime.UTC is Python 3.11+; jobqueue supports 3.10.
UTC = timezone.utc
T0 = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)

pytestmark = pytest.mark.django_db


def dead_job():
    """Enqueued at T0, failed twice, last run started at +10 s, dead 2.5 s later."""
    return make_job(
        JobState.DEAD,
        created_at=T0,
        run_at=T0,
        started_at=T0 + timedelta(seconds=10),
        finished_at=T0 + timedelta(seconds=12.5),
        attempts=3,
        max_attempts=3,
        leased_by="web-1:4242",
        dead_reason=DeadReason.ATTEMPTS_EXHAUSTED,
        errors=[
            error_entry(1, at=T0 + timedelta(seconds=1), message="first try failed"),
            error_entry(2, at=T0 + timedelta(seconds=4), message="second try failed"),
            error_entry(3, at=T0 + timedelta(seconds=12.5), message="third try failed"),
        ],
    )


def timeline_rows(page: str) -> list[str]:
    body = re.search(r'<div class="jq-timeline">(.*?)</div>', page, re.S)
    assert body, "no timeline on the page"
    rows = re.findall(r"<tr class=\"jq-moment[^\"]*\">(.*?)</tr>", body[1], re.S)
    return [" ".join(re.sub(r"<[^>]+>", " ", row).split()) for row in rows]


def test_the_timeline_lists_each_moment_in_order_with_the_time_since_the_last(
    admin_client, settings
):
    settings.TIME_ZONE = "UTC"
    job = dead_job()
    response = admin_client.get(reverse("admin:jobqueue_job_change", args=[job.id]))
    assert response.status_code == 200
    rows = timeline_rows(response.content.decode())
    assert rows == [
        "2026-03-04 05:06:07 UTC enqueued queue default",
        "2026-03-04 05:06:08 UTC +1.00 s attempt 1: run failed ConnectionError: first try failed",
        "2026-03-04 05:06:11 UTC +3.00 s attempt 2: run failed ConnectionError: second try failed",
        "2026-03-04 05:06:17 UTC +6.00 s attempt 3: started web-1:4242",
        "2026-03-04 05:06:19 UTC +2.50 s attempt 3: run failed ConnectionError: third try failed",
        "2026-03-04 05:06:19 UTC +0 ms finished dead",
    ]
    shown = text(response)
    assert (
        "waited (due to started): 10.00 s · latest run: 2.50 s · enqueued to finished: 12.50 s"
    ) in shown


def test_times_on_the_job_page_follow_the_current_zone_with_seconds(admin_client, settings):
    settings.TIME_ZONE = "Europe/Berlin"
    job = dead_job()
    shown = text(admin_client.get(reverse("admin:jobqueue_job_change", args=[job.id])))
    assert "2026-03-04 06:06:07 CET" in shown  # enqueued, in Berlin
    assert "2026-03-04 06:06:19 CET" in shown  # finished
    assert "a.m." not in shown and "p.m." not in shown  # not Django's default date format


def test_a_job_page_leaves_out_the_fields_it_has_no_value_for(admin_client):
    bare = dead_job()
    page = admin_client.get(reverse("admin:jobqueue_job_change", args=[bare.id])).content.decode()
    for absent in (
        "field-dedupe_key",
        "field-ordering_key",
        "field-batch_link",
        "field-lease_token",
        "field-result_block",
        "field-checkpoint_block",
        "field-cancel_requested_label",
        "field-progress_label",
    ):
        assert absent not in page, absent
    assert ">Progress<" not in page and ">Result<" not in page  # empty sections go too
    for present in ("field-id", "field-state_label", "field-timeline", "field-reason_label"):
        assert present in page, present
    keyed = make_job(JobState.READY, dedupe_key="order-1042")
    page = admin_client.get(reverse("admin:jobqueue_job_change", args=[keyed.id])).content.decode()
    assert "field-dedupe_key" in page and "order-1042" in page


def test_a_waiting_scheduled_job_shows_when_it_is_due(admin_client, settings):
    settings.TIME_ZONE = "UTC"
    due = T0 + timedelta(minutes=5)
    job = make_job(JobState.SCHEDULED, created_at=T0, run_at=due)
    rows = timeline_rows(
        admin_client.get(reverse("admin:jobqueue_job_change", args=[job.id])).content.decode()
    )
    assert rows == [
        "2026-03-04 05:06:07 UTC enqueued queue default",
        "2026-03-04 05:11:07 UTC +5 min 0 s due claimable from this time",
    ]


def test_the_lists_name_their_zone_and_show_seconds(admin_client, settings):
    settings.TIME_ZONE = "UTC"
    dead_job()
    for name in ("job", "deadletter"):
        shown = text(admin_client.get(reverse(f"admin:jobqueue_{name}_changelist")))
        assert "Times are in UTC" in shown, name
        assert re.search(r"\b(Mar 04|2026-03-04) 05:06:19\b", shown), name
