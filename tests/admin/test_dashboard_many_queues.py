"""The dashboard at thousands of queues (issue 33): the deepest and the oldest queues listed, the
rest summed in one row, a search by name, and a slower self-reload.

Queue names come from enqueue, so a site deriving them from its data reaches thousands: at
10,000 queues the page was 17 MB, took 7.3 s to render and reloaded itself every 5 s.
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from jobqueue.ops import queues as queue_ops
from tests.factories import make_jobs

pytestmark = pytest.mark.django_db

DASHBOARD = reverse("admin:jobqueue_dashboard")


def listed(page: str) -> list[str]:
    body = page.split('id="jq-queues"', 1)[1].split("<tfoot>", 1)[0]
    return re.findall(r'<tr data-queue="([^"]*)"', body)


@pytest.fixture
def many_queues(monkeypatch):
    """300 queues of one ready job; q000 is the deepest, q299 has the oldest job; top 5."""
    # The documented test hook: the module constant, read at each render (raising=False: the
    # same test runs where it does not exist yet, and fails on the page instead).
    monkeypatch.setattr(queue_ops, "TOP_QUEUES", 5, raising=False)
    now = timezone.now()
    for n in range(300):
        make_jobs(1, queue=f"q{n:03}", run_at=now - timedelta(seconds=5))
    make_jobs(9, queue="q000", run_at=now - timedelta(seconds=5))
    make_jobs(1, queue="q299", run_at=now - timedelta(hours=3))


def test_past_top_queues_the_page_lists_the_deepest_and_oldest_and_sums_the_rest(
    admin_client, many_queues
):
    page = admin_client.get(DASHBOARD).content.decode()
    rows = listed(page)
    assert "q000" in rows and "q299" in rows  # the deepest, the oldest
    assert len(rows) <= 2 * 5 + 1, rows
    assert rows[-1] == "_other"
    others = re.search(r"(\d+) other queues", page)
    # (and the queues the settings name, which have no jobs)
    assert others and int(others[1]) + len(rows) - 1 >= 300, (others, rows)
    # The refresh: a minute apart with this many queues, not 5 s.
    assert 'data-refresh-seconds="60"' in page


def test_the_search_lists_the_queues_whose_name_contains_it(admin_client, many_queues):
    page = admin_client.get(DASHBOARD, {"q": "Q29"}).content.decode()
    rows = listed(page)
    # q290..q299 match (case-insensitive); past the top 5 they are summarised the same way.
    assert "q299" in rows and rows[-1] == "_other", rows
    assert all(name.startswith("q29") for name in rows[:-1]), rows
    assert f"{10 - (len(rows) - 1)} other queues" in page
    assert "q000" not in rows
    # Its links keep working: each row links to that queue's jobs.
    assert 'href="/admin/jobqueue/job/?queue=q299' in page
