"""The rollup's families in the Prometheus text: outcome rates and the two histograms.

Runs recorded through the store with known times (claim and finish_many with ``now``), scraped
through the view: the rates cover the last five complete minutes only, the histograms hold the
exact cumulative buckets.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import override_settings

from jobqueue import metrics
from jobqueue.models import CronEntry
from jobqueue.ops.clock import db_now
from jobqueue.ops.rollup import ALL_QUEUES, chart_data
from jobqueue.retries import RunOutcome
from jobqueue.states import DeadReason, JobState
from jobqueue.store import get_store
from tests.factories import make_job
from tests.ops.test_metrics import parse, scraped  # noqa: F401  (scraped: the fixture)

pytestmark = pytest.mark.django_db

NOOP = "tests.testapp.jobs.noop"
KEY = f'queue="mail",type="{NOOP}"'


def run_two(at, pickup_s: float, run_s: float) -> None:
    """Claim two jobs of queue mail at ``at``, due ``pickup_s`` before; one succeeds, one dies."""
    store = get_store()
    for _ in range(2):
        make_job(queue="mail", type=NOOP, run_at=at - timedelta(seconds=pickup_s))
    held = store.claim(["mail"], "w", 2, 30.0, now=at)
    assert len(held) == 2
    ok, bad = held
    outcomes = [
        RunOutcome(job_id=ok.id, lease_token=ok.lease_token, state=JobState.SUCCEEDED),
        RunOutcome(
            job_id=bad.id,
            lease_token=bad.lease_token,
            state=JobState.DEAD,
            error={"kind": "error", "attempt": 1, "type": "E", "message": "m"},
            dead_reason=DeadReason.PERMANENT_ERROR,
        ),
    ]
    assert len(store.finish_many(outcomes, now=at + timedelta(seconds=run_s))) == 2


def test_counters_and_histograms_from_the_first_reading_on(scraped):  # noqa: F811
    now = db_now()
    run_two(now - timedelta(minutes=2), pickup_s=0.4, run_s=2.0)
    run_two(now - timedelta(minutes=20), pickup_s=100.0, run_s=100.0)  # before the first reading

    m = scraped()

    runs = "jobqueue_job_runs_total"
    assert m[f'{runs}{{{KEY},outcome="succeeded"}}'] == 1
    assert m[f'{runs}{{{KEY},outcome="dead"}}'] == 1
    assert m[f'{runs}{{{KEY},outcome="retried"}}'] == 0
    pickup = "jobqueue_pickup_latency_seconds"
    assert m[f'{pickup}_bucket{{{KEY},le="0.25"}}'] == 0
    assert m[f'{pickup}_bucket{{{KEY},le="0.5"}}'] == 2
    assert m[f'{pickup}_bucket{{{KEY},le="300"}}'] == 2
    assert m[f'{pickup}_bucket{{{KEY},le="+Inf"}}'] == 2
    assert m[f"{pickup}_count{{{KEY}}}"] == 2
    assert m[f"{pickup}_sum{{{KEY}}}"] == pytest.approx(0.8)
    run = "jobqueue_run_duration_seconds"
    assert m[f'{run}_bucket{{{KEY},le="1"}}'] == 0
    assert m[f'{run}_bucket{{{KEY},le="2.5"}}'] == 2
    assert m[f"{run}_sum{{{KEY}}}"] == pytest.approx(4.0)


def test_no_runs_no_rollup_samples(scraped):  # noqa: F811
    m = scraped()
    assert not [k for k in m if k.startswith(("jobqueue_job_runs", "jobqueue_pickup"))]


def test_quiet_sampled_minutes_draw_a_zero_line_not_no_data():
    """Minutes sampled while every queue was empty draw depth and lag as zeros ("all queues"),
    not "no data yet" (a release-candidate trial: twelve sampled minutes, empty charts)."""
    store = get_store()
    now = db_now()
    assert store.sample_depth(now=now - timedelta(minutes=3)) >= 1
    data = chart_data(now, 3600, 60)
    assert not data.empty
    [depth], [lag] = data.depth, data.lag
    assert depth.name == lag.name == ALL_QUEUES
    assert [v for _, v in depth.points if v is not None] == [0.0]
    assert [v for _, v in lag.points if v is not None] == [0.0]
    # A minute nobody sampled stays a gap.
    assert sum(v is None for _, v in depth.points) == len(depth.points) - 1


def test_a_queue_gone_idle_reads_zero_instead_of_dropping_out():
    """A queue whose jobs all finished keeps its per-queue gauges at 0 (its series vanished:
    an alert on ``jobqueue_jobs{state="ready"} > X`` went stale, graphs had gaps); so does a
    queue only declared (``JOBQUEUE["QUEUES"]``, a job type's ``@job(queue=)``, a cron entry)."""
    store = get_store()
    make_job(queue="mail", type=NOOP)
    [held] = store.claim(["mail"], "w", 1, 30.0)
    store.finish_many(
        [RunOutcome(job_id=held.id, lease_token=held.lease_token, state=JobState.SUCCEEDED)]
    )
    CronEntry.objects.create(name="nightly", cron_expr="0 3 * * *", job_type=NOOP, queue="crons")
    with override_settings(JOBQUEUE={"QUEUES": ["declared"]}):
        m = parse(metrics.compute())
    assert m[f'jobqueue_job_runs_total{{{KEY},outcome="succeeded"}}'] == 1
    for queue in ("mail", "declared", "crons", "default"):  # default: the test jobs' @job queue
        for state in ("ready", "scheduled", "leased", "dead", "waiting"):
            assert m[f'jobqueue_jobs{{queue="{queue}",state="{state}"}}'] == 0
        assert m[f'jobqueue_oldest_claimable_age_seconds{{queue="{queue}"}}'] == 0
        assert m[f'jobqueue_queue_unserved{{queue="{queue}"}}'] == 0
        assert m[f'jobqueue_queue_paused{{queue="{queue}"}}'] == 0
        assert m[f'jobqueue_running_jobs{{queue="{queue}"}}'] == 0
