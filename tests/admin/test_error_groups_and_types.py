"""The dead letters grouped by error and the dashboard's per-type table, through the test client.

The groups: one row per (exception, message) of the dead jobs' last errors, with the count, the
first and last time seen, masked messages, and a link to the list of that group's jobs. The
per-type table: runs, failures, failure rate and p50/p95 run duration over the charts' span,
read from the per-minute rollup.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

import pytest
from django.urls import reverse

from jobqueue.models import Rollup
from jobqueue.models.metrics import bucket_columns
from jobqueue.ops.clock import db_now
from jobqueue.ops.rollup import minute_of
from jobqueue.states import JobState
from tests.factories import error_entry, make_job

# datetime.UTC is Python 3.11+; jobqueue supports 3.10.
UTC = timezone.utc
T0 = datetime(2026, 3, 4, 5, 0, 0, tzinfo=UTC)

pytestmark = pytest.mark.django_db


def dead(at: datetime, kind: str, message: str, **kw):
    entry = {**error_entry(1, at=at), "type": kind, "message": message}
    return make_job(JobState.DEAD, finished_at=at, errors=[entry], **kw).id


def group_rows(page: str) -> list[str]:
    table = re.search(
        r'<div class="module jq-module" id="jq-error-groups">(.*?)</div>\s*<div', page, re.S
    )
    assert table, "no error groups on the page"
    rows = re.findall(r"<tr data-error-type[^>]*>(.*?)</tr>", table[1], re.S)
    return [" ".join(re.sub(r"<[^>]+>", " ", row).split()) for row in rows]


def test_dead_letters_are_grouped_by_exception_and_message_most_first(admin_client, settings):
    settings.TIME_ZONE = "UTC"
    declined = [
        dead(T0 + timedelta(minutes=m), "GatewayError", "card declined (do_not_honor)")
        for m in (3, 1, 7)
    ]
    dead(T0 + timedelta(minutes=2), "GatewayError", "token=sk_live_abc123 refused")
    dead(T0 + timedelta(minutes=5), "JobTimeout", "ran past 30 s")
    url = reverse("admin:jobqueue_deadletter_changelist")
    page = admin_client.get(url).content.decode()
    first, last = "2026-03-04 05:0{}:00 UTC", "2026-03-04 05:0{}:00 UTC"
    assert group_rows(page) == [
        f"GatewayError card declined (do_not_honor) 3 {first.format(1)} {last.format(7)}",
        f"JobTimeout ran past 30 s 1 {first.format(5)} {last.format(5)}",
        f"GatewayError token=******** refused 1 {first.format(2)} {last.format(2)}",
    ]
    # Masked in the table, its tooltip and its link (which names the message by a digest).
    assert "sk_live_abc123" not in page
    # The group's link lists its jobs, and only those.
    link = re.search(r'<a href="([^"]*error_type=GatewayError[^"]*)">3</a>', page)
    assert link, "no link to the group's jobs"
    listed = admin_client.get(link[1].replace("&amp;", "&")).content.decode()
    ids = sorted(int(i) for i in re.findall(r'name="_selected_action" value="(\d+)"', listed))
    assert ids == sorted(declined)
    assert "GatewayError: card declined (do_not_honor)" in listed  # the filter names it


def test_a_group_link_with_no_match_lists_no_jobs(admin_client):
    dead(T0, "GatewayError", "declined")
    url = reverse("admin:jobqueue_deadletter_changelist") + "?error_type=Nope&error=nothing"
    listed = admin_client.get(url).content.decode()
    assert re.findall(r'name="_selected_action" value="(\d+)"', listed) == []


def rollup(minute, job_type, **counts):
    Rollup.objects.create(minute=minute, queue="q", type=job_type, shard=0, **counts)


def test_the_dashboard_lists_each_types_runs_failures_and_run_time_quantiles(admin_client):
    now = minute_of(db_now())
    runs = bucket_columns("run")  # le 0.01 0.05 0.1 0.25 0.5 1 2.5 5 10 30 60 300 s
    # Charge: 100 runs, 90 at most 0.5 s and 10 in (1, 2.5] s; 8 retried, 2 dead.
    cumulative = {c: 0 for c in runs}
    for i, column in enumerate(runs):
        cumulative[column] = 90 if i >= 4 else 0
        if i >= 6:
            cumulative[column] = 100
    rollup(now, "shop.jobs.charge_card", succeeded=90, retried=8, dead=2, run_count=100,
           run_sum_s=40.0, **cumulative)  # fmt: skip
    rollup(now - timedelta(minutes=5), "shop.jobs.send_receipt", succeeded=4, run_count=4,
           run_sum_s=0.2, **{c: 4 for c in runs})  # fmt: skip
    rollup(now - timedelta(hours=3), "shop.jobs.old_news", succeeded=7)  # outside the hour
    page = admin_client.get(reverse("admin:jobqueue_dashboard") + "?refresh=0").content.decode()
    rows = re.findall(r'<tr data-type="([^"]+)">(.*?)</tr>', page, re.S)
    cells = {name: re.findall(r'<td class="jq-num[^"]*">([^<]*)</td>', row) for name, row in rows}
    # p50: rank 50 of 100 falls in (0.25, 0.5] holding 90: 0.25 + 0.25 * 50/90 = 0.389 s;
    # p95: rank 95 falls in (1, 2.5] holding 10: 1 + 1.5 * 5/10 = 1.75 s.
    assert cells == {
        "shop.jobs.charge_card": ["100", "10", "10.0%", "2", "389 ms", "1.75 s", "400 ms"],
        "shop.jobs.send_receipt": ["4", "0", "0.0%", "0", "5 ms", "10 ms", "50 ms"],
    }
    assert [name for name, _ in rows] == ["shop.jobs.charge_card", "shop.jobs.send_receipt"]
    day = admin_client.get(reverse("admin:jobqueue_dashboard") + "?refresh=0&span=24h")
    assert 'data-type="shop.jobs.old_news"' in day.content.decode()
