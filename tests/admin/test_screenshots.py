"""The docs' admin pictures, retaken from the running admin: ``python docs/screenshots.py``.

A small shop's history (the browser harness's ``shop_history``, plus one dead charge with a
traceback, and the runs the charts test records so the charts and the per-type table have
figures), then the dashboard and a dead job's page with its timeline, 1,400 px wide, and the job
list filtered by queue and the dead letters grouped by error, 1,920 px wide (the filters beside
the list), in headless Chromium. Every run writes them to
``tests/output/docs_*.png``; with ``JOBQUEUE_UPDATE_DOCS_IMAGES=1`` (what ``docs/screenshots.py``
sets) they replace ``docs/images/``, so a test run never changes the checkout. Same harness as
``test_browser.py`` (its fixtures); skipped without Chromium, as those are.
"""

from __future__ import annotations

import os
import shutil
from datetime import timedelta

import pytest
from django.utils import timezone

from jobqueue.states import DeadReason, JobState
from tests.admin import test_browser as harness
from tests.admin.test_browser import CHROMIUM, OUTPUT, log_in, shop_history, sync_playwright
from tests.admin.test_charts_browser import record_runs
from tests.conftest import ROOT
from tests.factories import error_entry, make_job

# The harness's fixtures, used here by name.
browser, page, operator = harness.browser, harness.page, harness.operator

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM}"),
    pytest.mark.skipif(sync_playwright is None, reason="playwright is not installed"),
    pytest.mark.django_db(transaction=True),
]

IMAGES = ROOT / "docs" / "images"

TRACEBACK = """Traceback (most recent call last):
  File "/srv/shop/shop/jobs.py", line 41, in charge_card
    gateway.charge(order.card_token, order.total)
  File "/srv/shop/shop/payments.py", line 88, in charge
    raise GatewayError(response.reason)
shop.payments.GatewayError: card declined (do_not_honor)"""


def keep(page, name: str, *, full_page: bool = True) -> None:
    """Screenshot the page to tests/output/docs_<name>, and to docs/images/<name> on request.

    ``full_page=False``: the window only (a long list's first screen).
    """
    OUTPUT.mkdir(parents=True, exist_ok=True)
    taken = OUTPUT / f"docs_{name}"
    page.screenshot(path=str(taken), full_page=full_page)
    if os.environ.get("JOBQUEUE_UPDATE_DOCS_IMAGES") == "1":
        shutil.copyfile(taken, IMAGES / name)


def test_the_docs_admin_pictures(page, live_server, operator):
    shop_history()
    record_runs()
    now = timezone.now()
    # Enqueued 95 s ago; three runs failed at -90 s, -61 s and (the last, started at -3.4 s) -2 s.
    failed_at = (
        now - timedelta(seconds=90),
        now - timedelta(seconds=61),
        now - timedelta(seconds=2),
    )
    dead = make_job(
        JobState.DEAD,
        queue="payments",
        type="shop.jobs.charge_card",
        payload={"order_id": 1042, "card_token": "tok_visa_4242"},
        dead_reason=DeadReason.ATTEMPTS_EXHAUSTED,
        attempts=3,
        max_attempts=3,
        created_at=now - timedelta(seconds=95),
        run_at=now - timedelta(seconds=95),
        started_at=now - timedelta(seconds=3.4),
        finished_at=failed_at[-1],
        leased_by="web-1:4242:a1b2c3",
        errors=[
            {
                **error_entry(n, at=at, message="card declined (do_not_honor)"),
                "type": "GatewayError",
                "traceback": TRACEBACK,
            }
            for n, at in enumerate(failed_at, 1)
        ],
    )
    log_in(page, live_server, operator)
    base = f"{live_server.url}/admin/jobqueue"

    page.goto(f"{base}/job/dashboard/?refresh=0")
    page.wait_for_selector("#content")
    keep(page, "dashboard.png")

    page.set_viewport_size({"width": 1920, "height": 1000})
    page.goto(f"{base}/job/?queue=payments")
    page.wait_for_selector("#result_list")
    keep(page, "jobs.png", full_page=False)
    page.set_viewport_size({"width": 1400, "height": 900})

    page.goto(f"{base}/job/{dead.id}/change/")
    page.wait_for_selector("#content")
    keep(page, "job.png")

    page.set_viewport_size({"width": 1920, "height": 1000})
    page.goto(f"{base}/deadletter/")
    page.wait_for_selector("#result_list")
    keep(page, "dead_letters.png", full_page=False)
