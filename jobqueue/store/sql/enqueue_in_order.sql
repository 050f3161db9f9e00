-- enqueue_in_order: insert one job with an ordering key and no dedupe key, in the caller's transaction, after
-- ordering_lock.sql (issues 15 and 18: the key's followers wait off the claim's path).
-- The key's last job, live or waiting ("tail": one backward probe each of jobqueue_job_ordering and
-- jobqueue_job_ordering_wait), is locked as mark_parents.sql locks parents and flagged has_children; the new job
-- then waits (state waiting, outside every partial index) with the tail as its parent, run on failure too:
-- migration 0015's trigger releases it (ready, or scheduled till its run_at) when the tail succeeds, dies or is
-- cancelled, in that statement. A tail that ended since this snapshot fails the re-checked state and is not
-- returned: the job is then ready, and the claim still holds it behind any earlier live job of its key.
WITH tail AS (
    UPDATE jobqueue_job AS j
    SET has_children = true
    FROM (SELECT t.id FROM jobqueue_job AS t
          WHERE t.id = greatest(
                  (SELECT max(l.id) FROM jobqueue_job AS l
                   WHERE l.ordering_key = %(ordering_key)s AND l.state IN ('leased', 'ready', 'scheduled')),
                  (SELECT max(w.id) FROM jobqueue_job AS w
                   WHERE w.ordering_key = %(ordering_key)s AND w.state = 'waiting'))
            AND t.state IN ('leased', 'ready', 'scheduled', 'waiting')
          FOR NO KEY UPDATE) AS p
    WHERE j.id = p.id
    RETURNING j.id
),
job AS (
    INSERT INTO jobqueue_job (
        queue, type, payload, priority, tenant_id, state, run_at, attempts, max_attempts, timeout_s,
        leased_by, ordering_key, concurrency_key, concurrency_limit, errors, dead_reason, created_at, waiting_for
    )
    SELECT %(queue)s, %(type)s, %(payload)s::jsonb, %(priority)s, %(tenant_id)s,
           CASE WHEN EXISTS (SELECT 1 FROM tail) THEN 'waiting'
                WHEN t.run_at > now() THEN 'scheduled' ELSE 'ready' END,
           t.run_at, 0, %(max_attempts)s, %(timeout_s)s, '', %(ordering_key)s,
           %(concurrency_key)s, %(concurrency_limit)s, '[]'::jsonb, '', now(), (SELECT count(*) FROM tail)
    FROM (
        SELECT coalesce(%(run_at)s::timestamptz, now() + make_interval(secs => %(delay_s)s::float8)) AS run_at
    ) AS t
    RETURNING id, created_at
),
edge AS (
    INSERT INTO jobqueue_jobparent (parent_id, child_id, counted, run_on_parent_failure, takes_parent_results)
    SELECT tail.id, job.id, false, true, false FROM tail CROSS JOIN job
)
SELECT id, created_at FROM job
