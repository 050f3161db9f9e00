"""The admin in a real browser: headless Chromium (Debian's package) driven by Playwright.

Against pytest-django's live server, on a committed database (``transaction=True``), so the
server thread and the worker subprocesses see what the test writes. Screenshots of the dashboard
and the dead-letter page go to ``tests/output/``. Skipped, with the reason, where
``/usr/bin/chromium`` or Playwright is missing (``.ci/setup-venv`` installs both).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from django.contrib.auth.models import Permission, User
from django.utils import timezone

from jobqueue.models import Job, Worker
from jobqueue.states import DeadReason, JobState
from tests.conftest import FAST_WORKER_SETTINGS, ROOT, requires_postgres
from tests.factories import error_entry, make_job, make_jobs

CHROMIUM = Path(os.environ.get("JOBQUEUE_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
OUTPUT = ROOT / "tests" / "output"

try:
    from playwright.sync_api import Page, expect, sync_playwright
except ImportError:  # pragma: no cover - the dev extra installs it
    sync_playwright = None

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM}"),
    pytest.mark.skipif(sync_playwright is None, reason="playwright is not installed"),
    pytest.mark.django_db(transaction=True),
]

PASSWORD = "correct horse battery staple"
#: The confirmation page's button (Django's wording, with a typographic apostrophe).
CONFIRM = "Yes, I\u2019m sure"


@pytest.fixture(scope="module")
def browser():
    # Playwright's sync API keeps an asyncio loop on this thread, which makes Django refuse
    # database calls "from an async context". None of ours runs inside that loop.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
            try:
                yield chromium
            finally:
                chromium.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def page(browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.set_default_timeout(60_000)  # a loaded machine renders slowly
    try:
        yield context.new_page()
    finally:
        context.close()


def log_in(page: Page, live_server, username: str) -> None:
    page.goto(f"{live_server.url}/admin/login/?next=/admin/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    expect(page.locator("#user-tools")).to_contain_text(username.upper(), ignore_case=True)


@pytest.fixture
def operator(db) -> str:
    User.objects.create_superuser("operator", "op@example.com", PASSWORD)
    return "operator"


def screenshot(page: Page, name: str) -> Path:
    OUTPUT.mkdir(parents=True, exist_ok=True)
    path = OUTPUT / name
    page.screenshot(path=str(path), full_page=True)
    return path


def shop_history() -> datetime:
    """A small shop's queues: a backlog of receipts, retries, dead letters, two workers.

    Returns the moment the history was made: the oldest ready receipt became due 42 s before.
    """
    now = timezone.now()
    receipts, charges = "shop.jobs.send_receipt", "shop.jobs.charge_card"
    make_jobs(7, JobState.READY, queue="emails", type=receipts, run_at=now - timedelta(seconds=42))
    make_jobs(2, JobState.LEASED, queue="emails", type=receipts)
    make_jobs(3, JobState.SCHEDULED, queue="payments", type=charges, attempts=1)
    make_jobs(1, JobState.LEASED, queue="payments", type=charges)
    make_jobs(120, JobState.SUCCEEDED, queue="emails", type=receipts, finished_at=now)
    make_jobs(35, JobState.SUCCEEDED, queue="payments", type=charges, finished_at=now)
    make_jobs(2, JobState.CANCELLED, queue="payments", type=charges)
    make_jobs(
        3,
        JobState.DEAD,
        queue="payments",
        type=charges,
        dead_reason=DeadReason.PERMANENT_ERROR,
        errors=[error_entry(1, message="card declined (do_not_honor)")],
        attempts=1,
        max_attempts=8,
    )
    make_jobs(
        1,
        JobState.DEAD,
        queue="reports",
        type="shop.jobs.nightly_report",
        dead_reason=DeadReason.TIMEOUT,
        errors=[
            {**error_entry(n), "type": "JobTimeout", "message": "ran past 30 s"} for n in (1, 2, 3)
        ],
    )
    Worker.objects.create(
        worker_id="web-1:4242:a1b2c3",
        host="web-1",
        pid=4242,
        queues=["emails", "payments"],
        concurrency=10,
        running_jobs=3,
    )
    Worker.objects.create(
        worker_id="web-2:977:d4e5f6",
        host="web-2",
        pid=977,
        queues=["reports"],
        concurrency=2,
        last_seen_at=now - timedelta(minutes=12),
    )
    return now


def test_dashboard_shows_the_right_counts(page, live_server, operator):
    made = shop_history()
    log_in(page, live_server, operator)
    page.goto(f"{live_server.url}/admin/jobqueue/")
    page.click("text=Queue dashboard")
    expect(page.locator("h1")).to_have_text("Queue dashboard")
    expect(page.locator("#jq-live")).to_have_attribute("data-refresh-seconds", "5")
    emails, payments = (page.locator(f'tr[data-queue="{q}"]') for q in ("emails", "payments"))
    expect(emails.locator('td[data-state="ready"]')).to_have_text("7")
    expect(emails.locator('td[data-state="leased"]')).to_have_text("2")
    expect(emails.locator('td[data-state="succeeded"]')).to_have_text("120")
    expect(payments.locator('td[data-state="scheduled"]')).to_have_text("3")
    expect(payments.locator('td[data-state="dead"]')).to_have_text("3")
    # The lag is 42 s plus however long the page took to come up (a loaded machine: seconds,
    # maybe past a minute, which reads "1 min").
    lag_format = re.compile(r"^(?:(\d+\.\d) s|(\d+) min)$")
    expect(emails.locator(".jq-lag")).to_have_text(lag_format)
    seconds, minutes = lag_format.match(emails.locator(".jq-lag").inner_text()).groups()
    lag_s = float(seconds) if seconds else 60 * int(minutes)
    assert 41.9 <= lag_s <= 42.1 + (timezone.now() - made).total_seconds(), lag_s
    expect(page.locator("#jq-workers h2")).to_have_text("Workers (1 alive of 2)")
    expect(page.locator("#jq-dead-letters")).to_contain_text("shop.jobs.charge_card")
    screenshot(page, "dashboard.png")
    # A count links to the matching jobs.
    payments.locator('td[data-state="dead"] a').click()
    expect(page.locator("#result_list tbody tr")).to_have_count(3)


@requires_postgres()
@pytest.mark.slow
def test_retry_a_dead_letter_and_see_it_succeed_after_a_worker_runs(
    page, live_server, operator, workers
):
    shop_history()
    job = make_job(
        JobState.DEAD,
        type="tests.testapp.jobs.add",
        payload={"a": 2, "b": 3},
        max_attempts=3,
        errors=[error_entry(n, message="upstream unavailable") for n in (1, 2, 3)],
    )
    log_in(page, live_server, operator)
    page.goto(f"{live_server.url}/admin/jobqueue/deadletter/")
    expect(page.locator("#result_list")).to_contain_text("upstream unavailable")
    screenshot(page, "dead_letters.png")
    page.check(f'input.action-select[value="{job.id}"]')
    page.select_option("select[name=action]", "retry_jobs")
    page.click("button[name=index]")
    expect(page.locator("#content")).to_contain_text("You are about to retry 1 job.")
    page.get_by_role("button", name=CONFIRM).click()
    expect(page.locator("ul.messagelist")).to_contain_text("Retried 1 job.")
    assert Job.objects.get(id=job.id).state == JobState.READY
    result = workers.run("--burst", "--queues", "default", settings=FAST_WORKER_SETTINGS)
    assert result.returncode == 0, result.stderr
    page.goto(f"{live_server.url}/admin/jobqueue/job/{job.id}/change/")
    expect(page.locator(".fieldBox.field-state_label")).to_contain_text("succeeded")
    expect(page.locator(".field-result_block")).to_contain_text("5")
    expect(page.locator(".field-error_history")).to_contain_text("retried by operator")
    row = Job.objects.get(id=job.id)
    assert (row.state, row.attempts, row.result) == (JobState.SUCCEEDED, 1, 5)


def test_cancel_a_scheduled_job(page, live_server, operator):
    job = make_job(JobState.SCHEDULED, type="shop.jobs.reminder")
    other = make_job(JobState.SCHEDULED, type="shop.jobs.reminder")
    log_in(page, live_server, operator)
    page.goto(f"{live_server.url}/admin/jobqueue/job/?state=scheduled")
    page.check(f'input.action-select[value="{job.id}"]')
    page.select_option("select[name=action]", "cancel_jobs")
    page.click("button[name=index]")
    expect(page.locator("#content")).to_contain_text("You are about to cancel 1 job.")
    page.get_by_role("button", name=CONFIRM).click()
    expect(page.locator("ul.messagelist")).to_contain_text("Cancelled 1 job.")
    assert Job.objects.get(id=job.id).state == JobState.CANCELLED
    assert Job.objects.get(id=other.id).state == JobState.SCHEDULED
    page.goto(f"{live_server.url}/admin/jobqueue/job/{job.id}/change/")
    expect(page.locator(".fieldBox.field-state_label .jq-state")).to_have_text("cancelled")


def test_a_read_only_user_sees_no_action_buttons(page, live_server):
    viewer = User.objects.create_user("viewer", password=PASSWORD, is_staff=True)
    for codename in ("view_job", "view_worker"):
        viewer.user_permissions.add(Permission.objects.get(codename=codename))
    dead = make_job(JobState.DEAD)
    log_in(page, live_server, "viewer")
    for path in ("/admin/jobqueue/job/", "/admin/jobqueue/deadletter/"):
        page.goto(f"{live_server.url}{path}")
        expect(page.locator("#result_list")).to_be_visible()
        expect(page.locator("select[name=action]")).to_have_count(0)
        expect(page.locator("input.action-select")).to_have_count(0)
    page.goto(f"{live_server.url}/admin/jobqueue/job/{dead.id}/change/")
    expect(page.locator(".fieldBox.field-state_label")).to_contain_text("dead")
    expect(page.locator(".jq-inline-action")).to_have_count(0)
    expect(
        page.locator("input[type=submit], button[type=submit]").filter(has_text="Save")
    ).to_have_count(0)
    page.goto(f"{live_server.url}/admin/jobqueue/job/dashboard/")
    expect(page.locator("h1")).to_have_text("Queue dashboard")
