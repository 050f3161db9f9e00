"""FIELD-CASES 30 at its own size: no statement of the metrics, the health check, the reaper or
the pruner scans ``jobqueue_job`` sequentially beside 1,000,000 finished rows.

The table is filled with one INSERT ... SELECT generate_series (1,000,000 succeeded, 100,000
dead, 10,000 ready in ``backlog``, which no worker serves, 50,000 scheduled a day ahead in
``q``, 3 due in ``q``, 20 leased with expired leases), then ``ANALYZE``d (statistics, no
visibility map: the hardest case for index-only plans). Each statement is captured while the
real code runs and then EXPLAINed with the planner's statistics. The gauges read at that size
are checked too: ``backlog`` reads 10,000 ready, and the future rows do not lift ``q``'s oldest
claimable age.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from jobqueue import metrics
from jobqueue.maintenance.pruning import Pruner, count_prunable
from jobqueue.ops import health
from jobqueue.store import get_store
from tests.conftest import requires_postgres
from tests.ops.test_metrics import assert_no_seq_scan_on_jobs, parse

FILL = """
INSERT INTO jobqueue_job (queue, type, payload, priority, tenant_id, state, run_at, attempts,
    max_attempts, timeout_s, leased_by, errors, dead_reason, suspect, created_at, started_at,
    finished_at, lease_token, lease_until)
SELECT CASE WHEN g <= 1100000 THEN 'q' WHEN g <= 1110000 THEN 'backlog' ELSE 'q' END,
    'bench.noop', '{}', 0, 't' || (g % 50),
    CASE WHEN g <= 1000000 THEN 'succeeded' WHEN g <= 1100000 THEN 'dead'
         WHEN g <= 1110000 THEN 'ready' WHEN g <= 1160000 THEN 'scheduled'
         WHEN g <= 1160003 THEN 'ready' ELSE 'leased' END,
    CASE WHEN g <= 1110000 THEN now() - interval '1 hour'
         WHEN g <= 1160000 THEN now() + interval '1 day' ELSE now() - interval '2 seconds' END,
    1, 8, 30, CASE WHEN g > 1160003 THEN 'gone' ELSE '' END, '[]', '', false,
    now() - interval '9 days', now() - interval '9 days',
    CASE WHEN g <= 1100000 THEN now() - (g % 14400) * interval '1 minute' END,
    CASE WHEN g > 1160003 THEN gen_random_uuid() END,
    CASE WHEN g > 1160003 THEN now() - interval '1 minute' END
FROM generate_series(1, 1160023) AS g
"""


@requires_postgres()
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)  # the fill is committed, as a real table is
def test_field_case_30_at_1m_finished_rows_no_statement_scans_the_jobs_table(settings):
    settings.JOBQUEUE = {"RETENTION": {"succeeded": 3600, "cancelled": 3600, "dead": 30 * 86400}}
    with connection.cursor() as cursor:
        cursor.execute(FILL)
        # Statistics only, no VACUUM: without the visibility map every index entry is priced
        # as a heap visit, the plan least favourable to an index (a table just bulk-loaded).
        cursor.execute("ANALYZE jobqueue_job")
    store = get_store()
    with CaptureQueriesContext(connection) as captured:
        gauges = parse(metrics.collect(max_age_s=0))
        verdict = health.check(host="nowhere")
        store.reap(limit=500)
        count_prunable(["succeeded", "cancelled"], 3600)
        Pruner(batch_size=100, max_batches=1).run_once()
    assert verdict.checks[0].ok  # the database answered
    assert gauges['jobqueue_jobs{queue="backlog",state="ready"}'] == 10_000
    assert gauges['jobqueue_jobs{queue="q",state="ready"}'] >= 3
    # 50,000: past the cap, a lower bound (claimable entries read, 10,001, minus the ready).
    assert 9_990 <= gauges['jobqueue_jobs{queue="q",state="scheduled"}'] <= 10_000
    assert gauges['jobqueue_queue_unserved{queue="backlog"}'] == 1
    assert 3000 <= gauges['jobqueue_oldest_claimable_age_seconds{queue="backlog"}'] < 7200
    assert gauges['jobqueue_oldest_claimable_age_seconds{queue="q"}'] < 300
    # Metrics (queue, dead, running, prunable), reaper (read, write), dry run, pruner batches.
    assert_no_seq_scan_on_jobs(captured.captured_queries, at_least=8)
