"""The dashboard's charts in Chromium: drawn from a rollup the store wrote, with the right lines.

Runs go through the store with known times (``claim``/``finish_many`` with ``now``), and the depth
sampler's ``sample_depth`` at three minutes; the page must draw each series with its number of
points, say what each chart is, and switch to the 24-hour span. A screenshot of the charts goes
to ``docs/images/dashboard-charts.png`` (docs/admin.md shows it).
"""

from __future__ import annotations

import os
from datetime import timedelta

from django.utils import timezone

from jobqueue.retries import RunOutcome
from jobqueue.states import JobState
from jobqueue.store import get_store
from tests.admin.test_browser import (  # noqa: F401  (fixtures)
    CHROMIUM,
    OUTPUT,
    browser,
    expect,
    log_in,
    operator,
    page,
    pytestmark,
)
from tests.conftest import ROOT
from tests.factories import make_job, make_jobs

RECEIPTS = "shop.jobs.send_receipt"
#: Minutes ago at which runs were recorded, and at which depth was sampled.
RUN_MINUTES = (45, 30, 10, 2)
SAMPLE_MINUTES = (40, 20, 1)
#: The README's picture: rewritten only on request (JOBQUEUE_UPDATE_DOCS_IMAGES=1), so a test
#: run never leaves the checkout changed; every run writes its own copy under tests/output.
IMAGE = ROOT / "docs" / "images" / "dashboard-charts.png"


def record_runs() -> None:
    """Per minute of RUN_MINUTES: three runs of queue emails, two succeed and one retries."""
    store = get_store()
    now = timezone.now()
    for minutes in RUN_MINUTES:
        at = now - timedelta(minutes=minutes)
        for pickup_s in (0.3, 1.5, 4.0):
            make_job(queue="emails", type=RECEIPTS, run_at=at - timedelta(seconds=pickup_s))
        held = store.claim(["emails"], "w", 3, 30.0, now=at)
        assert len(held) == 3
        error = {"kind": "error", "attempt": 1, "type": "E", "message": "m"}
        outcomes = [
            RunOutcome(job_id=j.id, lease_token=j.lease_token, state=JobState.SUCCEEDED)
            for j in held[:2]
        ] + [
            RunOutcome(
                job_id=held[2].id,
                lease_token=held[2].lease_token,
                state=JobState.SCHEDULED,
                error=error,
                delay_s=7200.0,
            )
        ]
        assert len(store.finish_many(outcomes, now=at + timedelta(seconds=0.5))) == 3
    make_jobs(5, queue="emails", type=RECEIPTS, run_at=now - timedelta(minutes=60))
    make_jobs(2, queue="payments", type="shop.jobs.charge_card", run_at=now - timedelta(minutes=60))
    for minutes in SAMPLE_MINUTES:
        assert store.sample_depth(now=now - timedelta(minutes=minutes)) == 3


def series(tab, chart: str) -> dict[str, str]:
    """Return ``{series name: its point count}`` of one chart, as drawn."""
    paths = tab.locator(f"#{chart} path.jq-series")
    return {
        paths.nth(i).get_attribute("data-series"): paths.nth(i).get_attribute("data-points")
        for i in range(paths.count())
    }


def test_charts_draw_the_rollup_for_the_last_hour_and_day(page, live_server, operator):  # noqa: F811
    record_runs()
    log_in(page, live_server, operator)
    page.goto(f"{live_server.url}/admin/jobqueue/job/dashboard/?refresh=0")
    expect(page.locator("#jq-charts h2")).to_have_text("Charts")
    throughput = page.locator("#jq-chart-throughput svg")
    expect(throughput.locator("title").first).to_have_text("Throughput, last hour")
    expect(throughput).to_have_attribute("role", "img")
    expect(throughput.locator("text", has_text="jobs per minute")).to_have_count(1)
    # A point per minute of the hour, zeros included; failed = the retried runs.
    assert series(page, "jq-chart-throughput") == {"succeeded": "60", "failed": "60"}
    # Depth and lag: a point per sampled minute, one line per queue.
    assert series(page, "jq-chart-depth") == {"emails": "3", "payments": "3"}
    assert series(page, "jq-chart-lag") == {"emails": "3", "payments": "3"}
    # Pickup latency: a point per minute that recorded runs.
    assert series(page, "jq-chart-pickup") == {"p50": "4", "p95": "4"}
    expect(page.locator("#jq-charts .jq-chart-empty")).to_have_count(0)
    OUTPUT.mkdir(parents=True, exist_ok=True)
    page.locator("#jq-charts").screenshot(path=str(OUTPUT / IMAGE.name))
    if os.environ.get("JOBQUEUE_UPDATE_DOCS_IMAGES") == "1":
        page.locator("#jq-charts").screenshot(path=str(IMAGE))

    page.click("#jq-charts >> text=last 24 hours")
    expect(page.locator("#jq-chart-throughput figcaption")).to_have_text(
        "Throughput, last 24 hours"
    )
    # A point per 15 minutes of the day; the runs fall into at most four of them.
    assert series(page, "jq-chart-throughput") == {"succeeded": "96", "failed": "96"}
    assert int(series(page, "jq-chart-pickup")["p50"]) in range(3, 5)


def test_charts_say_no_data_yet_without_a_rollup(page, live_server, operator):  # noqa: F811
    log_in(page, live_server, operator)
    page.goto(f"{live_server.url}/admin/jobqueue/job/dashboard/?refresh=0")
    expect(page.locator("#jq-charts .jq-chart-empty")).to_have_count(4)
    expect(page.locator("#jq-charts .jq-chart-empty").first).to_have_text("no data yet")
    expect(page.locator("#jq-chart-pickup svg desc")).to_contain_text("95th percentile")
