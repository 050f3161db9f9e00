"""The admin's layout at 1,400 px in real Chromium: what a user saw broken, measured.

Each test asserts an outcome of the rendered page (element boxes, overflow), not markup: the
dashboard link reads across, the job, dead-letter and worker lists fit the window with their
dates on one line, a ready job's Cancel and History buttons sit on one line. Screenshots go to
``tests/output/layout_*.png``. Same harness as ``test_admin_browser.py`` (its fixtures).
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from jobqueue.models import Pause, Worker
from jobqueue.states import DeadReason, JobState
from tests.admin import test_browser as harness
from tests.admin.test_browser import CHROMIUM, log_in, screenshot, sync_playwright
from tests.factories import error_entry, make_job, make_jobs

# The harness's fixtures, used here by name.
browser, page, operator = harness.browser, harness.page, harness.operator

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM}"),
    pytest.mark.skipif(sync_playwright is None, reason="playwright is not installed"),
    pytest.mark.django_db(transaction=True),
]

#: How many line boxes an element's text makes (a Range's client rects: one per line fragment).
LINES_OF = """el => {
    const range = document.createRange();
    range.selectNodeContents(el);
    const tops = new Set(Array.from(range.getClientRects()).map(r => Math.round(r.top)));
    return tops.size;
}"""
#: Whether an element's content is wider than its box (cut off, or scrolled sideways).
OVERFLOWS = "el => el.scrollWidth > el.clientWidth + 1"


def long_jobs() -> None:
    """Jobs with long type names, tenants and errors: what a real list shows."""
    now = timezone.now()
    long_type = "shop.billing.jobs.reconcile_payment_provider_settlement_report"
    make_jobs(3, JobState.READY, queue="payments-eu-west", type=long_type, tenant_id="tenant-42")
    make_jobs(
        3,
        JobState.DEAD,
        queue="payments-eu-west",
        type=long_type,
        tenant_id="tenant-42",
        finished_at=now,
        dead_reason=DeadReason.ATTEMPTS_EXHAUSTED,
        attempts=8,
        errors=[
            error_entry(
                8,
                message="upstream returned 503 Service Unavailable while fetching the "
                "settlement report for merchant acct_1NxYz (retry later)",
            )
        ],
    )


def test_app_index_dashboard_link_reads_across(page, live_server, operator):
    log_in(page, live_server, operator)
    page.goto(f"{live_server.url}/admin/jobqueue/")
    link = page.locator(".jq-app-dashboard a", has_text="Queue dashboard")
    screenshot(page, "layout_app_index.png")
    box = link.bounding_box()
    assert box is not None
    assert link.evaluate(LINES_OF) == 1, box
    # Wider than tall by far: the words sit side by side, not one character per line.
    assert box["width"] > 4 * box["height"], box


def test_site_index_links_the_dashboard(page, live_server, operator):
    log_in(page, live_server, operator)
    page.goto(f"{live_server.url}/admin/")
    link = page.locator("#content-main a", has_text="Queue dashboard")
    screenshot(page, "layout_site_index.png")
    assert link.count() >= 1
    assert link.first.evaluate(LINES_OF) == 1
    link.first.click()
    assert page.locator("h1").inner_text() == "Queue dashboard"


@pytest.mark.parametrize(
    ("path", "dates"),
    [
        ("/admin/jobqueue/job/", ("run_at_short", "finished_short")),
        ("/admin/jobqueue/deadletter/", ("dead_at",)),
        ("/admin/jobqueue/worker/", ("started_label", "last_seen_label")),
    ],
)
def test_lists_fit_1400px_with_dates_on_one_line(page, live_server, operator, path, dates):
    long_jobs()
    Worker.objects.create(
        worker_id="ip-10-0-12-34.eu-west-1.compute.internal:41234:9f8e7d6c5b4a",
        host="ip-10-0-12-34.eu-west-1.compute.internal",
        pid=41234,
        queues=["payments-eu-west", "emails", "reports", "default"],
        concurrency=16,
        last_seen_at=timezone.now() - timedelta(seconds=3),
    )
    log_in(page, live_server, operator)
    page.goto(f"{live_server.url}{path}")
    name = path.strip("/").split("/")[-1]
    screenshot(page, f"layout_list_{name}.png")
    results = page.locator("#changelist .results")
    assert not results.evaluate(OVERFLOWS), results.evaluate(
        "el => [el.scrollWidth, el.clientWidth]"
    )
    assert page.evaluate("document.documentElement.scrollWidth") <= 1400
    for column in dates:
        cells = page.locator(f"#result_list td.field-{column}")
        assert cells.count() >= 1, column
        for i in range(cells.count()):
            assert cells.nth(i).evaluate(LINES_OF) == 1, (column, cells.nth(i).inner_text())


def test_cancel_and_history_buttons_line_up_on_a_ready_job(page, live_server, operator):
    job = make_job(JobState.READY)
    log_in(page, live_server, operator)
    page.goto(f"{live_server.url}/admin/jobqueue/job/{job.id}/change/")
    screenshot(page, "layout_ready_job.png")
    cancel = page.locator(".object-tools .jq-action-cancel_jobs").bounding_box()
    history = page.locator(".object-tools a.historylink").bounding_box()
    assert cancel is not None and history is not None
    assert abs(cancel["y"] - history["y"]) <= 1, (cancel, history)
    assert abs(cancel["height"] - history["height"]) <= 1, (cancel, history)


def test_dashboard_pause_and_resume_buttons_in_the_queue_table(page, live_server, operator):
    make_jobs(2, JobState.READY, queue="emails")
    log_in(page, live_server, operator)
    page.goto(f"{live_server.url}/admin/jobqueue/job/dashboard/?refresh=0")
    row = page.locator('tr[data-queue="emails"]')
    button = row.locator("button.jq-pause")
    # In its row, on one line with the counts.
    row_box, button_box = row.bounding_box(), button.bounding_box()
    assert row_box is not None and button_box is not None
    assert (
        row_box["y"]
        <= button_box["y"]
        <= button_box["y"] + button_box["height"]
        <= (row_box["y"] + row_box["height"])
    )
    button.click()
    assert "Paused queue emails." in page.locator("ul.messagelist").inner_text()
    row = page.locator('tr[data-queue="emails"]')
    assert row.locator(".jq-lag").inner_text().endswith("paused")
    screenshot(page, "layout_dashboard_paused.png")
    assert Pause.objects.get(name="emails").paused_by == "operator"
    row.locator("button.jq-resume").click()
    assert "Resumed queue emails." in page.locator("ul.messagelist").inner_text()
    assert not Pause.objects.exists()
