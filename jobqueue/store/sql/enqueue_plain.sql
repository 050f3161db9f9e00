-- enqueue_plain: insert one job with neither a dedupe key nor an ordering key, in the caller's transaction.
-- Row for row what enqueue.sql inserts for such a job, as one VALUES row: no ON CONFLICT (nothing to conflict on)
-- and no ordering-key chaining, so about a third of enqueue.sql's planning (issue 15). No index read.
-- Returns the row's created_at too: the transaction's clock, which the tasks backend reports as enqueued_at.
INSERT INTO jobqueue_job (
    queue, type, payload, priority, tenant_id, state, run_at, attempts, max_attempts, timeout_s,
    leased_by, concurrency_key, concurrency_limit, errors, dead_reason, created_at, trace
)
VALUES (
    %(queue)s, %(type)s, %(payload)s::jsonb, %(priority)s, %(tenant_id)s,
    CASE WHEN coalesce(%(run_at)s::timestamptz, now() + make_interval(secs => %(delay_s)s::float8)) > now()
         THEN 'scheduled' ELSE 'ready' END,
    coalesce(%(run_at)s::timestamptz, now() + make_interval(secs => %(delay_s)s::float8)),
    0, %(max_attempts)s, %(timeout_s)s, '', %(concurrency_key)s, %(concurrency_limit)s, '[]'::jsonb, '', now(),
    %(trace)s::jsonb
)
RETURNING id, created_at
