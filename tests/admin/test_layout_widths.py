"""The job and dead-letter lists and the dashboard at 1,280 and 1,920 px in real Chromium.

What an operator saw broken, measured on the rendered page: the filter band wider than the
page, a filter's choices hidden behind a scroll box or under the next filter, "Has date" cut
off, dotted job type names broken inside a word, the dashboard's cron names and dates wrapped
over several lines. Screenshots go to ``tests/output/width_*.png``. Same harness as
``test_browser.py`` (its fixtures).
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from jobqueue.models import CronEntry, DependencyBreaker, Rollup
from jobqueue.ops.clock import db_now
from jobqueue.ops.rollup import minute_of
from jobqueue.states import DeadReason, JobState
from tests.admin import test_browser as harness
from tests.admin.test_browser import CHROMIUM, OUTPUT, log_in, sync_playwright
from tests.factories import error_entry, make_jobs

browser, operator = harness.browser, harness.operator

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM}"),
    pytest.mark.skipif(sync_playwright is None, reason="playwright is not installed"),
    pytest.mark.django_db(transaction=True),
]

WIDTHS = (1280, 1920)
LONG_TYPE = "shop.billing.jobs.reconcile_payment_provider_settlement_report"

#: Problems of the filter band, as text (empty: none): a choice hidden behind a scroll box,
#: a block over another, a block or choice past the band's or the window's right edge.
FILTER_PROBLEMS = """() => {
    const problems = [];
    const band = document.querySelector('#changelist-filter');
    const right = Math.min(document.documentElement.clientWidth,
                           document.querySelector('#content').getBoundingClientRect().right);
    const bandBox = band.getBoundingClientRect();
    if (bandBox.right > right + 1) problems.push(`band ends at ${bandBox.right} > ${right}`);
    const blocks = Array.from(band.querySelectorAll('details'));
    const boxes = blocks.map(b => b.getBoundingClientRect());
    blocks.forEach((block, i) => {
        const name = block.querySelector('summary').innerText.trim();
        if (block.scrollHeight > block.clientHeight + 1)
            problems.push(`${name}: scrolls (${block.scrollHeight} > ${block.clientHeight})`);
        boxes.forEach((other, j) => {
            if (j > i && boxes[i].left < other.right - 1 && other.left < boxes[i].right - 1
                && boxes[i].top < other.bottom - 1 && other.top < boxes[i].bottom - 1)
                problems.push(`${name} overlaps block ${j}`);
        });
        block.querySelectorAll('li a').forEach(a => {
            const box = a.getBoundingClientRect();
            if (box.right > bandBox.right + 1 || box.bottom > boxes[i].bottom + 1)
                problems.push(`${name}: "${a.innerText}" cut off`);
        });
    });
    return problems;
}"""

#: Where a cell's text wraps: the character before each line break (a Range per character).
BREAKS_AFTER = """el => {
    const text = el.innerText;
    const node = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    const tops = [];
    let chars = '';
    while (node.nextNode()) {
        const t = node.currentNode;
        for (let i = 0; i < t.length; i++) {
            const range = document.createRange();
            range.setStart(t, i); range.setEnd(t, i + 1);
            const rects = range.getClientRects();
            if (!rects.length) continue;
            tops.push(Math.round(rects[0].top)); chars += t.data[i];
        }
    }
    const breaks = [];
    for (let i = 1; i < tops.length; i++) if (tops[i] > tops[i - 1]) breaks.push(chars[i - 1]);
    return breaks;
}"""
LINES_OF = """el => {
    const range = document.createRange();
    range.selectNodeContents(el);
    return new Set(Array.from(range.getClientRects()).map(r => Math.round(r.top))).size;
}"""


def dead_and_ready_jobs() -> None:
    """Long type names, tenants and errors: what a real list shows."""
    now = timezone.now()
    make_jobs(3, JobState.READY, queue="payments-eu-west", type=LONG_TYPE, tenant_id="tenant-42")
    make_jobs(2, JobState.READY, queue="emails", type="shop.jobs.charge_card")
    make_jobs(
        3,
        JobState.DEAD,
        queue="payments-eu-west",
        type=LONG_TYPE,
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


@pytest.fixture
def sized_page(browser, request):
    context = browser.new_context(viewport={"width": request.param, "height": 900})
    context.set_default_timeout(60_000)
    try:
        yield context.new_page()
    finally:
        context.close()


@pytest.mark.parametrize("sized_page", WIDTHS, indirect=True, ids=[f"{w}px" for w in WIDTHS])
def test_job_and_dead_letter_lists_fit_with_every_filter_choice_shown(
    sized_page, live_server, operator
):
    page = sized_page
    width = page.viewport_size["width"]
    dead_and_ready_jobs()
    log_in(page, live_server, operator)
    for name in ("job", "deadletter"):
        page.goto(f"{live_server.url}/admin/jobqueue/{name}/")
        OUTPUT.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(OUTPUT / f"width_{name}_{width}.png"), full_page=True)
        assert page.evaluate(FILTER_PROBLEMS) == [], name
        assert page.evaluate("document.documentElement.scrollWidth") <= width, name
        results = page.locator("#changelist .results")
        assert results.evaluate("el => el.scrollWidth <= el.clientWidth + 1"), (
            name,
            results.evaluate("el => [el.scrollWidth, el.clientWidth]"),
            page.evaluate(
                "Array.from(document.querySelectorAll('#result_list thead th'))"
                ".map(th => th.className + ':' + Math.round(th.getBoundingClientRect().width))"
            ),
        )
        # Every state is offered and visible (the list used to hide succeeded, dead, ...).
        if name == "job":
            for state in ("succeeded", "dead", "cancelled", "waiting"):
                link = page.locator("#changelist-filter a", has_text=state).first
                assert link.is_visible(), state
        # A dotted name wraps at its dots or underscores, never inside a word.
        cells = page.locator('#result_list td[class*="field-type"]')
        assert cells.count() >= 1, name
        for i in range(cells.count()):
            breaks = cells.nth(i).evaluate(BREAKS_AFTER)
            assert set(breaks) <= {".", "_"}, (name, cells.nth(i).inner_text(), breaks)


@pytest.mark.parametrize("sized_page", WIDTHS, indirect=True, ids=[f"{w}px" for w in WIDTHS])
def test_dashboard_reads_cron_rows_on_one_line_charts_at_full_size_with_hover_values(
    sized_page, live_server, operator
):
    page = sized_page
    width = page.viewport_size["width"]
    dead_and_ready_jobs()
    soon = timezone.now() + timedelta(minutes=3)
    for name in ("nightly-settlement-report", "hourly-reconcile-payments"):
        CronEntry.objects.create(
            name=name,
            cron_expr="0 * * * *",
            timezone="Europe/Amsterdam",
            queue="payments-eu-west",
            job_type=LONG_TYPE,
            next_fire_at=soon,
            last_fired_at=soon - timedelta(hours=1),
        )
    DependencyBreaker.objects.create(name="stripe", state="open", reason="5 failures in 60 s")
    minute = minute_of(db_now()) - timedelta(minutes=3)
    Rollup.objects.create(minute=minute, queue="emails", type=LONG_TYPE, succeeded=18, retried=2)
    log_in(page, live_server, operator)
    page.goto(f"{live_server.url}/admin/jobqueue/job/dashboard/?refresh=0")
    OUTPUT.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(OUTPUT / f"width_dashboard_{width}.png"), full_page=True)
    # An open breaker reads red.
    colour = page.locator("#jq-breakers tr.jq-breaker-open td").first.evaluate(
        "el => getComputedStyle(el).color"
    )
    assert colour == "rgb(197, 48, 48)", colour
    # Chart text is at least 11 px on screen (a tick label's box), not scaled down to ~8.
    tick = page.locator("#jq-chart-throughput svg text[text-anchor=end]").first
    assert tick.bounding_box()["height"] >= 11, tick.bounding_box()
    # Hovering a step shows its time and every series' value beside the pointer.
    stamp = timezone.localtime(minute).strftime("%H:%M:%S")
    band = page.locator(f'#jq-chart-throughput rect.jq-hover[data-tip^="{stamp}"]')
    band.hover()
    tip = page.locator("#jq-tooltip")
    assert tip.is_visible()
    assert tip.inner_text().startswith(stamp), tip.inner_text()
    assert "succeeded 18 · failed 2 (jobs per minute)" in tip.inner_text()
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    # The name, next fire and last fired columns of both rows.
    cells = page.locator(
        "#jq-cron tbody td:nth-child(1), #jq-cron tbody td:nth-child(5), "
        "#jq-cron tbody td:nth-child(6)"
    )
    assert cells.count() == 6
    for i in range(cells.count()):
        assert cells.nth(i).evaluate(LINES_OF) == 1, cells.nth(i).inner_text()


@pytest.mark.parametrize("sized_page", WIDTHS[:1], indirect=True, ids=["1280px"])
def test_dashboard_refreshes_its_figures_without_reloading_the_page(
    sized_page, live_server, operator
):
    page = sized_page
    make_jobs(2, JobState.READY, queue="emails")
    log_in(page, live_server, operator)
    page.goto(f"{live_server.url}/admin/jobqueue/job/dashboard/")
    ready = page.locator('tr[data-queue="emails"] td[data-state="ready"]')
    assert ready.inner_text() == "2"
    page.evaluate("window.jqSamePage = true")  # gone if the page reloads
    make_jobs(3, JobState.READY, queue="emails")
    # The next refresh (every 5 s) swaps the figures in: poll for it.
    harness.expect(ready).to_have_text("5", timeout=60_000)
    assert page.evaluate("window.jqSamePage") is True
    assert int(page.locator("#jq-live").get_attribute("data-refreshes")) >= 1
