"""The Prometheus view (``jobqueue.metrics.view``), scraped through Django's test client.

Known rows in, exact metric lines out. The PostgreSQL tests at the end are FIELD-CASES 30's plan
check: every statement a scrape issues, EXPLAINed with the planner's statistics over a table of
200,000 finished rows, uses an index on ``jobqueue_job`` (no sequential scan); and the same at
the case's own size, 1,000,000 succeeded rows, for every statement of the metrics, the health
check, the reaper and the pruner (tests/ops/test_scrape_plans.py).
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.core.cache import caches
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from jobqueue import metrics
from jobqueue.limits import pauses as pausing
from jobqueue.limits.breakers import open_breaker
from jobqueue.models import CronEntry, GaugeSnapshot, Worker
from jobqueue.states import JobState
from tests.conftest import requires_postgres
from tests.factories import make_job, make_jobs

pytestmark = pytest.mark.django_db

SAMPLE = re.compile(r"^(?P<name>[a-z_]+)(?:\{(?P<labels>.*)\})? (?P<value>\S+)$")
RETENTION = {"succeeded": 3600, "cancelled": 3600, "dead": None}
ON_JOBS = re.compile(r"\bjobqueue_job\b")
SEQ_SCAN = re.compile(r"Seq Scan on jobqueue_job\b")


def ago(**kwargs: float):
    return timezone.now() - timedelta(**kwargs)


def scrape(client, url: str = "/metrics/") -> dict[str, float]:
    response = client.get(url)
    assert response.status_code == 200
    assert response["Content-Type"] == metrics.CONTENT_TYPE
    return parse(response.content.decode())


def parse(text: str) -> dict[str, float]:
    samples = {}
    for line in text.splitlines():
        if line.startswith("#"):
            assert line.startswith(("# HELP jobqueue_", "# TYPE jobqueue_")), line
            continue
        match = SAMPLE.match(line)
        assert match, line
        key = f"{match['name']}{{{match['labels'] or ''}}}"
        samples[key] = float(match["value"])
    return samples


@pytest.fixture
def scraped(client):
    def run(url: str = "/metrics/", interval: float = 0) -> dict[str, float]:
        settings = {
            "RETENTION": RETENTION,
            "METRICS_INTERVAL_SECONDS": interval,
            "METRICS_PUBLIC": True,
        }
        with override_settings(ROOT_URLCONF="tests.metrics_urls", JOBQUEUE=settings):
            return scrape(client, url)

    return run


@pytest.fixture
def rows():
    make_job(queue="emails", run_at=ago(minutes=10))
    make_job(queue="emails")
    make_job(JobState.SCHEDULED, queue="emails", run_at=ago(hours=-5))  # future: no lag
    make_job(JobState.SCHEDULED, queue="later", run_at=ago(hours=-1))
    make_job(JobState.LEASED, queue="emails", tenant_id="acme")
    make_job(JobState.LEASED, queue="emails", tenant_id="acme")
    make_job(JobState.LEASED, queue="bulk", tenant_id='we"ird\\')
    make_job(JobState.DEAD, queue="emails")
    make_job(JobState.SUCCEEDED, queue="emails", finished_at=ago(hours=2))
    make_job(JobState.SUCCEEDED, queue="emails", finished_at=ago(hours=3))
    make_job(JobState.SUCCEEDED, queue="emails", finished_at=ago(minutes=2))
    make_job(JobState.CANCELLED, queue="emails", finished_at=ago(hours=2))
    make_job(JobState.DEAD, queue="emails", finished_at=ago(days=90))  # dead: kept forever
    make_job(queue="orphan", run_at=ago(minutes=3))
    make_job(JobState.WAITING, queue="emails")  # waits for parent jobs (after=[...])
    make_job(JobState.WAITING, queue="emails")
    make_job(JobState.WAITING, queue="children")  # a queue holding only waiting jobs
    Worker.objects.create(
        worker_id="w",
        host="h",
        pid=1,
        queues=["emails", "bulk"],
        concurrency=2,
        heartbeat_interval_s=600,
    )
    Worker.objects.create(
        worker_id="old",
        host="h",
        pid=2,
        queues=["orphan"],
        concurrency=2,
        heartbeat_interval_s=600,
        last_seen_at=ago(hours=1),
    )
    CronEntry.objects.create(
        name="hourly", cron_expr="0 * * * *", job_type="x", last_fired_at=ago(minutes=30)
    )
    CronEntry.objects.create(name="never", cron_expr="0 * * * *", job_type="x")
    open_breaker("partner", 60, reason="test")


def test_gauges_from_known_rows(rows, scraped):
    s = scraped()
    jobs = {k: v for k, v in s.items() if k.startswith("jobqueue_jobs{")}
    assert jobs['jobqueue_jobs{queue="emails",state="ready"}'] == 2
    assert jobs['jobqueue_jobs{queue="emails",state="scheduled"}'] == 1
    assert jobs['jobqueue_jobs{queue="emails",state="leased"}'] == 2
    assert jobs['jobqueue_jobs{queue="emails",state="dead"}'] == 2
    assert jobs['jobqueue_jobs{queue="later",state="scheduled"}'] == 1
    assert jobs['jobqueue_jobs{queue="emails",state="waiting"}'] == 2
    assert jobs['jobqueue_jobs{queue="children",state="waiting"}'] == 1
    assert jobs['jobqueue_jobs{queue="later",state="waiting"}'] == 0
    assert not any('state="succeeded"' in k for k in jobs)  # unbounded: not counted
    age = s['jobqueue_oldest_claimable_age_seconds{queue="emails"}']
    assert 600 <= age < 3600  # the oldest due job; the job 5 h ahead does not count
    assert s['jobqueue_oldest_claimable_age_seconds{queue="later"}'] == 0
    assert s['jobqueue_queue_unserved{queue="orphan"}'] == 1
    assert s['jobqueue_queue_unserved{queue="emails"}'] == 0
    assert s['jobqueue_running_jobs{queue="emails"}'] == 2
    assert s['jobqueue_running_jobs{queue="bulk"}'] == 1
    assert s['jobqueue_running_jobs_by_tenant{tenant="acme"}'] == 2
    assert s['jobqueue_running_jobs_by_tenant{tenant="we\\"ird\\\\"}'] == 1
    assert s["jobqueue_workers_alive{}"] == 1
    assert s["jobqueue_breakers_open{}"] == 1
    assert s['jobqueue_breaker_open{dependency="partner",state="open"}'] == 1
    fired = s['jobqueue_cron_last_fire_timestamp_seconds{entry="hourly"}']
    assert 1800 <= timezone.now().timestamp() - fired < 3600
    # An entry that never fired still has its sample (issue 31).
    assert s['jobqueue_cron_last_fire_timestamp_seconds{entry="never"}'] == 0
    assert s['jobqueue_cron_enabled{entry="never"}'] == 1
    assert 'jobqueue_cron_overdue_seconds{entry="never"}' in s
    assert s['jobqueue_rows_awaiting_prune{state="succeeded"}'] == 2
    assert s['jobqueue_rows_awaiting_prune{state="cancelled"}'] == 1
    assert 'jobqueue_rows_awaiting_prune{state="dead"}' not in s  # kept forever
    assert s["jobqueue_scrape_duration_seconds{}"] >= 0


def test_empty_queue_database_scrapes(scraped):
    s = scraped()
    assert s["jobqueue_workers_alive{}"] == 0
    assert s["jobqueue_breakers_open{}"] == 0
    assert s['jobqueue_rows_awaiting_prune{state="succeeded"}'] == 0


def test_cached_view_serves_one_reading_until_the_cache_lets_it_go(scraped):
    cache = caches["default"]
    cache.clear()
    make_job(queue="emails")
    assert scraped("/cached/")['jobqueue_jobs{queue="emails",state="ready"}'] == 1
    make_job(queue="emails")
    assert scraped("/cached/")['jobqueue_jobs{queue="emails",state="ready"}'] == 1
    assert scraped()['jobqueue_jobs{queue="emails",state="ready"}'] == 2  # a fresh reading
    cache.clear()
    GaugeSnapshot.objects.all().delete()  # and the shared reading (its interval is 3600 s too)
    assert scraped("/cached/")['jobqueue_jobs{queue="emails",state="ready"}'] == 2


def test_cached_view_refuses_a_nonsense_interval():
    with pytest.raises(ValueError, match=r"seconds must be from 0\.1 to 3600, got 0"):
        metrics.cached_view(0)


def test_one_reading_per_interval_is_shared_by_every_scrape(scraped):
    """FIELD-CASES 30: cluster-wide gauges are computed once per interval, not per scrape."""
    make_job(queue="emails")
    first = scraped(interval=600)
    assert first['jobqueue_jobs{queue="emails",state="ready"}'] == 1
    make_job(queue="emails")
    with CaptureQueriesContext(connection) as captured:
        second = scraped(interval=600)
    # The shared reading, not a new one: one read of its row, nothing of the jobs table.
    assert second['jobqueue_jobs{queue="emails",state="ready"}'] == 1
    assert second["jobqueue_gauges_age_seconds{}"] >= 0
    statements = [q["sql"] for q in captured.captured_queries]
    assert len(statements) == 1, statements
    assert "jobqueue_gaugesnapshot" in statements[0]
    # Once the reading is older than the interval, the next scrape recomputes it.
    GaugeSnapshot.objects.update(computed_at=timezone.now() - timedelta(seconds=601))
    assert scraped(interval=600)['jobqueue_jobs{queue="emails",state="ready"}'] == 2


def test_a_reading_another_process_is_computing_is_served_stale(scraped):
    make_job(queue="emails")
    scraped(interval=600)
    make_job(queue="emails")
    # Stale, but another process holds the recomputation: this scrape serves the old reading.
    GaugeSnapshot.objects.update(
        computed_at=timezone.now() - timedelta(seconds=700),
        computing_until=timezone.now() + timedelta(seconds=60),
    )
    s = scraped(interval=600)
    assert s['jobqueue_jobs{queue="emails",state="ready"}'] == 1
    assert s["jobqueue_gauges_age_seconds{}"] >= 690
    # Its holder died: after computing_until, the next scrape takes over.
    GaugeSnapshot.objects.update(computing_until=timezone.now() - timedelta(seconds=1))
    assert scraped(interval=600)['jobqueue_jobs{queue="emails",state="ready"}'] == 2


def test_field_case_30_gauge_semantics():
    """Ready depth of a 10,000-job backlog, capped past it; oldest age ignores future run_at."""
    # Due by the database clock, which in this test's transaction stands at its start.
    make_jobs(3, queue="q", run_at=ago(seconds=30))
    make_jobs(10_000, queue="backlog", run_at=ago(minutes=5))
    make_jobs(500, JobState.SCHEDULED, queue="q", run_at=ago(days=-1))
    make_jobs(200, JobState.SCHEDULED, queue="later", run_at=ago(hours=-3))
    s = parse(metrics.compute())
    assert s['jobqueue_jobs{queue="backlog",state="ready"}'] == 10_000
    assert s['jobqueue_jobs{queue="q",state="ready"}'] == 3
    assert s['jobqueue_jobs{queue="q",state="scheduled"}'] == 500
    assert 300 <= s['jobqueue_oldest_claimable_age_seconds{queue="backlog"}'] < 3600
    # The 500 rows a day ahead do not lift q's age above its due jobs' (30 s ago).
    assert 0 < s['jobqueue_oldest_claimable_age_seconds{queue="q"}'] < 300
    # Nothing claimable: 0, not a stale or future age.
    assert s['jobqueue_oldest_claimable_age_seconds{queue="later"}'] == 0
    # Past the cap the count reads as the cap (documented: "that many or more").
    make_jobs(50, queue="backlog", run_at=ago(minutes=1))
    assert parse(metrics.compute())['jobqueue_jobs{queue="backlog",state="ready"}'] == 10_000


@requires_postgres()
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)  # VACUUM cannot run inside the test's transaction
def test_field_case_30_no_scrape_statement_scans_the_jobs_table(rows, scraped):
    """200k finished rows, 2k ready in an unserved queue, 4k scheduled ahead; ANALYZE; EXPLAIN.

    The live rows are 3% of the table, as in field case 30 (1M finished, 60k live: 5%); with a
    larger share the planner may rightly prefer a scan of the whole (small) table.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO jobqueue_job (queue, type, payload, priority, tenant_id, state, run_at,
                attempts, max_attempts, timeout_s, leased_by, errors, dead_reason, suspect,
                created_at, started_at, finished_at)
            SELECT CASE WHEN g <= 200000 THEN 'q' WHEN g <= 202000 THEN 'backlog' ELSE 'q' END,
                'bench.noop', '{}', 0, 't' || (g % 50), CASE
                    WHEN g <= 180000 THEN 'succeeded' WHEN g <= 200000 THEN 'dead'
                    WHEN g <= 202000 THEN 'ready' ELSE 'scheduled' END,
                CASE WHEN g <= 202000 THEN now() - interval '1 hour'
                     ELSE now() + interval '1 day' END,
                1, 8, 30, '', '[]', '', false, now() - interval '2 days', now() - interval '2 days',
                CASE WHEN g <= 200000 THEN now() - (g % 1000) * interval '1 minute' END
            FROM generate_series(1, 206000) AS g
            """
        )
        # As autovacuum leaves a real table: statistics, and the visibility map that makes the
        # counts index-only. Without it the planner prices every index entry as a heap visit and
        # may rightly prefer one scan of this small table (it did, one run in three).
        cursor.execute("VACUUM ANALYZE jobqueue_job")
    with CaptureQueriesContext(connection) as captured:
        s = scraped()
    assert s['jobqueue_jobs{queue="backlog",state="ready"}'] == 2000
    assert s['jobqueue_jobs{queue="q",state="scheduled"}'] == 4000
    assert s['jobqueue_queue_unserved{queue="backlog"}'] == 1
    # 169k succeeded rows are past the hour: more than are counted, so the planner estimates.
    assert 0.7 * 169_000 < s['jobqueue_rows_awaiting_prune{state="succeeded"}'] < 1.3 * 169_000
    assert_no_seq_scan_on_jobs(captured.captured_queries, at_least=4)


def statement_of(sql: str) -> str:
    """Return the statement of a captured query, without the transaction limits before it."""
    if sql.lstrip().startswith("-- limit_transaction"):
        return sql.split(";\n", 1)[1]
    return sql


def assert_no_seq_scan_on_jobs(captured: list[dict], at_least: int) -> list[str]:
    """EXPLAIN every captured statement on jobqueue_job; assert none scans it sequentially."""
    on_jobs = [
        statement_of(q["sql"])
        for q in captured
        if ON_JOBS.search(q["sql"]) and "EXPLAIN" not in q["sql"]
    ]
    assert len(on_jobs) >= at_least, on_jobs
    plans = []
    with connection.cursor() as cursor:
        for sql in on_jobs:
            cursor.execute(f"EXPLAIN {sql}")
            plan = "\n".join(row[0] for row in cursor.fetchall())
            assert not SEQ_SCAN.search(plan), f"{sql}\n{plan}"
            plans.append(plan)
    return plans


def test_listeners_are_counted_by_state_without_per_process_labels(scraped):
    """FIELD-CASES 26: live workers counted by LISTEN state; one without LISTEN (None) is not.

    Issue 31: ``jobqueue_listener_up{worker,host,pid}`` made new series at every recycle.
    """
    for worker_id, up in (("deaf", False), ("fine", True), ("polls", None)):
        Worker.objects.create(
            worker_id=worker_id,
            host="h",
            pid=7,
            concurrency=1,
            heartbeat_interval_s=600,
            listener_up=up,
        )
    s = scraped()
    assert s['jobqueue_worker_listeners{state="up"}'] == 1
    assert s['jobqueue_worker_listeners{state="down"}'] == 1
    assert not any("pid=" in key or "worker=" in key for key in s)


def test_paused_queues_and_types_are_gauges(scraped):
    """A planned pause is visible to alerting (found in a new-user trial: the lag of a paused
    queue climbed like an outage's, with nothing in the metrics to tell them apart)."""
    make_job(queue="emails", run_at=ago(minutes=5))
    make_job(queue="reports")
    pausing.pause("emails", by="ops")
    pausing.pause_type("tests.testapp.jobs.noop", by="ops")
    s = scraped()
    assert s['jobqueue_queue_paused{queue="emails"}'] == 1
    assert s['jobqueue_queue_paused{queue="reports"}'] == 0
    assert s['jobqueue_job_type_paused{type="tests.testapp.jobs.noop"}'] == 1
    pausing.resume("emails")
    assert scraped()['jobqueue_queue_paused{queue="emails"}'] == 0


def test_past_top_queues_the_rest_are_one_other_series(monkeypatch):
    """Issue 33: 10,000 queues were 90,019 samples. Past TOP_QUEUES (lowered to 3 here) the
    deepest and the oldest queues keep their series and the rest are summed as _other."""
    from jobqueue.ops import queues

    monkeypatch.setattr(queues, "TOP_QUEUES", 3, raising=False)
    for n in range(300):
        make_jobs(1, queue=f"q{n:03}", run_at=ago(seconds=10))
    make_jobs(4, queue="q000", run_at=ago(seconds=10))
    make_jobs(1, queue="q299", run_at=ago(hours=2))
    s = parse(metrics.compute())
    per_queue = {k for k in s if k.startswith("jobqueue_jobs{")}
    # 3 deepest (q000, then two with 2 jobs: q299 and, by name, q001) and 3 oldest, + _other.
    assert len(per_queue) <= 5 * (2 * 3 + 1), len(per_queue)
    assert s['jobqueue_jobs{queue="q000",state="ready"}'] == 5
    assert s['jobqueue_oldest_claimable_age_seconds{queue="q299"}'] >= 3600
    shown = {k.split('"')[1] for k in per_queue} - {"_other"}
    assert s['jobqueue_jobs{queue="_other",state="ready"}'] == 300 - len(shown)
    assert s['jobqueue_queue_unserved{queue="_other"}'] == 300 - len(shown)
    assert len(s) < 200, len(s)  # every family, not only the per-queue ones
