-- enqueue: insert one job in the caller's transaction; a live job holding the same dedupe key wins.
-- No lock on an ordering key (issue 33): the claim runs a key's jobs one at a time by id among those committed.
-- Returns the row's created_at too: the transaction's clock, which the tasks backend reports as enqueued_at.
-- ON CONFLICT infers the partial unique index jobqueue_job_live_dedupe_key and waits for an uncommitted competitor.
INSERT INTO jobqueue_job (
    queue, type, payload, priority, tenant_id, state, run_at, attempts, max_attempts, timeout_s,
    leased_by, dedupe_key, ordering_key, concurrency_key, concurrency_limit, errors, dead_reason,
    created_at, trace
)
SELECT %(queue)s, %(type)s, %(payload)s::jsonb, %(priority)s, %(tenant_id)s,
       CASE WHEN t.run_at > now() THEN 'scheduled' ELSE 'ready' END,
       t.run_at, 0, %(max_attempts)s, %(timeout_s)s, '', %(dedupe_key)s, %(ordering_key)s,
       %(concurrency_key)s, %(concurrency_limit)s, '[]'::jsonb, '', now(), %(trace)s::jsonb
FROM (
    SELECT coalesce(%(run_at)s::timestamptz, now() + make_interval(secs => %(delay_s)s::float8)) AS run_at
) AS t
ON CONFLICT (queue, dedupe_key)
    WHERE dedupe_key IS NOT NULL AND state IN ('leased', 'ready', 'scheduled')
    DO NOTHING
RETURNING id, created_at
