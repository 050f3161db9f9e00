-- enqueue_many: insert many jobs in one statement, in the caller's transaction; row for row what enqueue.sql does.
-- ON CONFLICT infers the partial unique index jobqueue_job_live_dedupe_key; the live holder's id is read through it.
-- Ids are drawn from the sequence in the MATERIALIZED CTE (once per input row, in input order), so each input row
-- knows its id whether it was inserted or not; a batch of several statements brings ids from reserve_ids.sql.
-- Rows are inserted in (queue, dedupe_key) order, byte order (COLLATE "C", as Python sorts the chunks), so two
-- batches sharing keys in any order take the unique index's entries in one order and never deadlock. A row that
-- lost to a live dedupe key gets the holder's id if this statement's snapshot sees it (NULL when the holder
-- committed after the snapshot: the caller looks again).
-- The caller collapses duplicate (queue, dedupe_key) pairs within the batch first.
WITH batch AS MATERIALIZED (
    -- One JSON array of jobs (one parameter): PostgreSQL parses it faster than psycopg dumps
    -- ten arrays of thousands of elements.
    SELECT *
    FROM ROWS FROM (
        jsonb_to_recordset(%(jobs)s::jsonb) AS (
            queue text, type text, payload jsonb, priority int, tenant_id text, at timestamptz,
            delay_s float8, max_attempts int, timeout_s float8, dedupe_key text, ordering_key text,
            concurrency_key text, concurrency_limit int, id bigint, trace jsonb)
    ) WITH ORDINALITY AS u(queue, type, payload, priority, tenant_id, at, delay_s, max_attempts,
                           timeout_s, dedupe_key, ordering_key, concurrency_key,
                           concurrency_limit, reserved_id, trace, ord)
),
input AS MATERIALIZED (
    -- The sequence is looked up once (an InitPlan), not once per row. COALESCE evaluates
    -- nextval only without a reserved id. No lock on ordering keys (issue 33), as enqueue.sql.
    SELECT coalesce(b.reserved_id,
                    nextval((SELECT pg_get_serial_sequence('jobqueue_job', 'id'))::regclass)) AS id,
           b.*,
           coalesce(b.at, now() + make_interval(secs => b.delay_s)) AS run_at
    FROM batch AS b
),
inserted AS (
    INSERT INTO jobqueue_job (
        id, queue, type, payload, priority, tenant_id, state, run_at, attempts, max_attempts,
        timeout_s, leased_by, dedupe_key, ordering_key, concurrency_key, concurrency_limit,
        errors, dead_reason, created_at, trace
    )
    SELECT id, queue, type, payload, priority, tenant_id,
           CASE WHEN run_at > now() THEN 'scheduled' ELSE 'ready' END,
           run_at, 0, max_attempts, timeout_s, '', dedupe_key, ordering_key, concurrency_key,
           concurrency_limit, '[]'::jsonb, '', now(), trace
    FROM input
    ORDER BY queue COLLATE "C", dedupe_key COLLATE "C", ord
    ON CONFLICT (queue, dedupe_key)
        WHERE dedupe_key IS NOT NULL AND state IN ('leased', 'ready', 'scheduled')
        DO NOTHING
    RETURNING id
)
SELECT i.ord, coalesce(ins.id, live.id) AS job_id, ins.id IS NOT NULL AS created
FROM input AS i
LEFT JOIN inserted AS ins ON ins.id = i.id
LEFT JOIN LATERAL (
    SELECT l.id FROM jobqueue_job AS l
    WHERE ins.id IS NULL AND l.queue = i.queue AND l.dedupe_key = i.dedupe_key
      AND l.state IN ('leased', 'ready', 'scheduled')
) AS live ON true
ORDER BY i.ord
