-- claim: lease up to max_jobs due jobs of the given queues, highest priority first, then oldest run_at.
-- Uses the partial index jobqueue_job_claim (queue, priority DESC, run_at, id) WHERE state IN ('ready', 'scheduled'),
-- once per queue: the LATERAL subquery reads each queue's head in index order (a plain
-- "queue = ANY(...)" would make PostgreSQL sort every claimable row), and the outer ORDER BY
-- merges the heads. The CTE is an optimization fence: it picks and row-locks the ids first (SKIP
-- LOCKED, so concurrent claims never wait on each other or hand out the same job), then the
-- UPDATE touches only those rows. Rows locked but cut by the outer LIMIT are unlocked at commit.
WITH picked AS (
    SELECT head.id
    FROM unnest(%(queues)s::text[]) AS q(name)
    CROSS JOIN LATERAL (
        SELECT id, priority, run_at
        FROM jobqueue_job
        WHERE queue = q.name
          AND state IN ('ready', 'scheduled')
          AND run_at <= coalesce(%(now)s::timestamptz, now())
        ORDER BY priority DESC, run_at, id
        LIMIT %(max_jobs)s
        FOR UPDATE SKIP LOCKED
    ) AS head
    ORDER BY head.priority DESC, head.run_at, head.id
    LIMIT %(max_jobs)s
)
UPDATE jobqueue_job AS j
SET state = 'leased',
    attempts = j.attempts + 1,
    lease_token = gen_random_uuid(),
    lease_until = coalesce(%(now)s::timestamptz, now()) + make_interval(secs => %(lease_s)s::float8),
    leased_by = %(worker_id)s,
    started_at = coalesce(%(now)s::timestamptz, now())
FROM picked
WHERE j.id = picked.id
RETURNING j.id, j.type, j.payload, j.attempts, j.max_attempts, j.timeout_s, j.lease_token,
          j.lease_until, j.queue, j.priority, j.tenant_id, j.run_at
