-- queue_gauges: per queue with claimable jobs: ready (due now), scheduled (run_at ahead), and the
-- run_at of the oldest due job (metrics, FIELD-CASES 30). Counts are exact up to %(cap)s; a
-- larger one reads %(cap)s ("that many or more").
--
-- Bounded by the index, not by the table: jobqueue_job_claim (queue, tenant_id, priority DESC,
-- run_at, id) over claimable rows is walked as a loose index scan, queue by queue, tenant by
-- tenant, priority by priority (one probe each, as claimable_queues.sql and claim.sql's "tenants"
-- do). Within one (queue, tenant, priority) group the entries are in run_at order, so the due
-- ones are one index range (run_at <= now), the future ones the next, and the oldest due job is
-- the group's first entry: 50,000 jobs delayed into the future are never read to find the few
-- that are due. Each group's ready count reads at most %(cap)s + 1 entries; at most
-- %(max_tenants)s tenants are walked per queue (a queue with more reports the ready jobs and the
-- oldest of the first ones only, and says so: truncated).
WITH RECURSIVE
queues AS (
    SELECT (SELECT min(j.queue) FROM jobqueue_job AS j
            WHERE j.state IN ('ready', 'scheduled')) AS name
    UNION ALL
    SELECT (SELECT min(j.queue) FROM jobqueue_job AS j
            WHERE j.state IN ('ready', 'scheduled') AND j.queue > q.name)
    FROM queues AS q
    WHERE q.name IS NOT NULL
),
tenants AS (
    SELECT q.name AS queue,
           (SELECT min(j.tenant_id) FROM jobqueue_job AS j
            WHERE j.queue = q.name AND j.state IN ('ready', 'scheduled')) AS tenant_id,
           1 AS n
    FROM queues AS q
    WHERE q.name IS NOT NULL
    UNION ALL
    SELECT t.queue,
           (SELECT min(j.tenant_id) FROM jobqueue_job AS j
            WHERE j.queue = t.queue AND j.state IN ('ready', 'scheduled')
              AND j.tenant_id > t.tenant_id),
           t.n + 1
    FROM tenants AS t
    WHERE t.tenant_id IS NOT NULL AND t.n <= %(max_tenants)s
),
groups AS (
    SELECT t.queue, t.tenant_id, t.n,
           (SELECT max(j.priority) FROM jobqueue_job AS j
            WHERE j.queue = t.queue AND j.tenant_id = t.tenant_id
              AND j.state IN ('ready', 'scheduled')) AS priority
    FROM tenants AS t
    WHERE t.tenant_id IS NOT NULL
    UNION ALL
    SELECT g.queue, g.tenant_id, g.n,
           (SELECT max(j.priority) FROM jobqueue_job AS j
            WHERE j.queue = g.queue AND j.tenant_id = g.tenant_id
              AND j.state IN ('ready', 'scheduled') AND j.priority < g.priority)
    FROM groups AS g
    WHERE g.priority IS NOT NULL
),
counted AS (
    SELECT g.queue, g.n,
           (SELECT count(*) FROM (
                SELECT 1 FROM jobqueue_job AS j
                WHERE j.queue = g.queue AND j.tenant_id = g.tenant_id AND j.priority = g.priority
                  AND j.state IN ('ready', 'scheduled')
                  AND j.run_at <= coalesce(%(now)s::timestamptz, now())
                LIMIT %(cap)s + 1) AS d) AS ready,
           (SELECT min(j.run_at) FROM jobqueue_job AS j
            WHERE j.queue = g.queue AND j.tenant_id = g.tenant_id AND j.priority = g.priority
              AND j.state IN ('ready', 'scheduled')
              AND j.run_at <= coalesce(%(now)s::timestamptz, now())) AS oldest
    FROM groups AS g
    WHERE g.priority IS NOT NULL
),
per_queue AS (
    SELECT c.queue, least(sum(c.ready), %(cap)s + 1) AS ready, min(c.oldest) AS oldest_due,
           max(c.n) > %(max_tenants)s AS truncated
    FROM counted AS c
    GROUP BY c.queue
)
-- Scheduled = claimable - ready, from one more capped read of the queue's entries (any order):
-- exact while the queue holds at most %(cap)s claimable jobs, a lower bound past that.
SELECT p.queue,
       least(p.ready, %(cap)s)::bigint AS ready,
       least(greatest(t.total - p.ready, 0), %(cap)s)::bigint AS scheduled,
       p.oldest_due,
       p.truncated
FROM per_queue AS p
CROSS JOIN LATERAL (
    SELECT count(*) AS total FROM (
        SELECT 1 FROM jobqueue_job AS j
        WHERE j.queue = p.queue AND j.state IN ('ready', 'scheduled')
        LIMIT %(cap)s + 1) AS a
) AS t
ORDER BY p.queue
