-- fire_cron: record one (cron entry, fire time) and insert its job, in one statement; nothing when it already fired or the leader token is stale.
-- The unique index jobqueue_cronfire_once (entry_id, fire_time) decides "already fired"; the leader row (unique name) fences a stale leader out.
-- The job id is drawn first, so the fire record can name the job it commits with. The job columns match enqueue.sql.
WITH leader AS (
    SELECT 1
    FROM jobqueue_leaderlease
    WHERE name = %(lease_name)s AND holder = %(holder)s AND fencing_token = %(token)s::bigint
),
fire AS (
    INSERT INTO jobqueue_cronfire (entry_id, fire_time, job_id, fired_at, fired_by, manual)
    SELECT %(entry_id)s, %(fire_time)s::timestamptz,
           nextval(pg_get_serial_sequence('jobqueue_job', 'id')),
           coalesce(%(now)s::timestamptz, now()), %(fired_by)s, %(manual)s
    WHERE %(token)s::bigint IS NULL OR EXISTS (SELECT 1 FROM leader)
    ON CONFLICT (entry_id, fire_time) DO NOTHING
    RETURNING job_id
),
job AS (
    INSERT INTO jobqueue_job (
        id, queue, type, payload, priority, tenant_id, state, run_at, attempts, max_attempts,
        timeout_s, leased_by, dedupe_key, concurrency_key, concurrency_limit, errors,
        dead_reason, created_at, trace
    )
    SELECT fire.job_id, %(queue)s, %(type)s, %(payload)s::jsonb, %(priority)s, %(tenant_id)s,
           CASE WHEN t.run_at > now() THEN 'scheduled' ELSE 'ready' END,
           t.run_at, 0, %(max_attempts)s, %(timeout_s)s, '', %(dedupe_key)s,
           %(concurrency_key)s, %(concurrency_limit)s, '[]'::jsonb, '', now(), %(trace)s::jsonb
    FROM fire, (
        SELECT coalesce(%(run_at)s::timestamptz, now() + make_interval(secs => %(delay_s)s::float8)) AS run_at
    ) AS t
    RETURNING id
)
SELECT %(token)s::bigint IS NULL OR EXISTS (SELECT 1 FROM leader) AS leading,
       (SELECT id FROM job) AS job_id
