-- enqueue_in_order: insert one job with an ordering key and no dedupe key, in the caller's transaction, behind its key's last job.
-- Two backward probes, jobqueue_job_ordering (live rows) and jobqueue_job_ordering_wait (waiting rows), find that job ("tail").
-- Issue 33: no lock at all. The tail is neither locked nor updated (a row lock held to the caller's commit blocked the
-- worker's heartbeat and the tail's finish; an advisory lock per key deadlocked transactions taking keys in opposite
-- orders). The new job waits (state waiting, outside every partial index) with the tail as its parent, run on failure
-- too; migration 0022's trigger (0015's, now also firing for any job with an ordering key, has_children or not)
-- releases it when the tail succeeds, dies or is cancelled. A tail that finishes after this statement's snapshot but
-- before the caller commits does not see the uncommitted link: release_stranded.sql (every reaper tick) releases it.
WITH tail AS (
    SELECT greatest(
        (SELECT max(l.id) FROM jobqueue_job AS l
         WHERE l.ordering_key = %(ordering_key)s AND l.state IN ('leased', 'ready', 'scheduled')),
        (SELECT max(w.id) FROM jobqueue_job AS w
         WHERE w.ordering_key = %(ordering_key)s AND w.state = 'waiting')) AS id
),
job AS (
    INSERT INTO jobqueue_job (
        queue, type, payload, priority, tenant_id, state, run_at, attempts, max_attempts, timeout_s,
        leased_by, ordering_key, concurrency_key, concurrency_limit, errors, dead_reason, created_at, waiting_for,
        trace
    )
    SELECT %(queue)s, %(type)s, %(payload)s::jsonb, %(priority)s, %(tenant_id)s,
           CASE WHEN tail.id IS NOT NULL THEN 'waiting'
                WHEN t.run_at > now() THEN 'scheduled' ELSE 'ready' END,
           t.run_at, 0, %(max_attempts)s, %(timeout_s)s, '', %(ordering_key)s,
           %(concurrency_key)s, %(concurrency_limit)s, '[]'::jsonb, '', now(),
           CASE WHEN tail.id IS NOT NULL THEN 1 ELSE 0 END, %(trace)s::jsonb
    FROM (
        SELECT coalesce(%(run_at)s::timestamptz, now() + make_interval(secs => %(delay_s)s::float8)) AS run_at
    ) AS t CROSS JOIN tail
    RETURNING id, created_at
),
edge AS (
    INSERT INTO jobqueue_jobparent (parent_id, child_id, counted, run_on_parent_failure, takes_parent_results)
    SELECT tail.id, job.id, false, true, false FROM tail CROSS JOIN job WHERE tail.id IS NOT NULL
)
SELECT id, created_at FROM job
