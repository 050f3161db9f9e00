-- enqueue_child: insert one job enqueued after parents, in the caller's transaction, in the state mark_parents decided:
-- waiting (outside every partial index), cancelled (a parent failed), or ready/scheduled by run_at (state NULL).
-- No dedupe key (refused with after=); no lock on an ordering key (issue 33), as enqueue.sql. Primary key only.
INSERT INTO jobqueue_job (
    queue, type, payload, priority, tenant_id, state, run_at, attempts, max_attempts, timeout_s,
    leased_by, ordering_key, concurrency_key, concurrency_limit, errors, dead_reason, created_at, finished_at,
    waiting_for, trace
)
SELECT %(queue)s, %(type)s, %(payload)s::jsonb, %(priority)s, %(tenant_id)s,
       coalesce(%(state)s::text, CASE WHEN t.run_at > now() THEN 'scheduled' ELSE 'ready' END),
       t.run_at, 0, %(max_attempts)s, %(timeout_s)s, '', %(ordering_key)s, %(concurrency_key)s,
       %(concurrency_limit)s, %(errors)s::jsonb, '', now(),
       CASE WHEN %(state)s::text = 'cancelled' THEN now() END, %(waiting_for)s, %(trace)s::jsonb
FROM (
    SELECT coalesce(%(run_at)s::timestamptz, now() + make_interval(secs => %(delay_s)s::float8)) AS run_at
) AS t
RETURNING id, created_at
