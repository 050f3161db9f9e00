-- retry_many: operator retry of many dead or cancelled jobs in one statement, row for row what retry.sql does.
-- Primary-key lookups, and the partial unique index jobqueue_job_live_dedupe_key for the dedupe check.
-- The first CTE locks the rows in id order (two bulk retries never deadlock) and re-reads their state after any
-- wait. A row whose dedupe key a live job holds is left alone, as is every row but the lowest id of a group of
-- selected rows sharing one key: retrying them all would put two live jobs on one key.
-- A job made ready sends pg_notify('jobqueue_ready', queue) at commit, like an insert (migration 0006_notify).
WITH picked AS (
    SELECT id, queue, dedupe_key
    FROM jobqueue_job
    WHERE id = ANY(%(ids)s::bigint[]) AND state IN ('dead', 'cancelled')
    ORDER BY id
    FOR UPDATE
),
ranked AS (
    SELECT id, queue, dedupe_key,
           row_number() OVER (PARTITION BY queue, dedupe_key ORDER BY id) AS rank
    FROM picked
),
eligible AS (
    SELECT r.id
    FROM ranked AS r
    WHERE r.dedupe_key IS NULL
       OR (r.rank = 1 AND NOT EXISTS (
               SELECT 1 FROM jobqueue_job AS live
               WHERE live.queue = r.queue AND live.dedupe_key = r.dedupe_key
                 AND live.state IN ('leased', 'ready', 'scheduled')))
)
UPDATE jobqueue_job AS j
SET state = 'ready', run_at = now(), attempts = 0, finished_at = NULL, dead_reason = '',
    lease_token = NULL, lease_until = NULL, result = NULL,
    errors = j.errors || jsonb_build_array(jsonb_build_object(
        'kind', 'operator_retry', 'at', now(), 'previous_state', j.state,
        'message', 'retried by operator', 'by', %(by)s::text))
FROM eligible AS e
WHERE j.id = e.id AND j.state IN ('dead', 'cancelled')
RETURNING j.id, pg_notify('jobqueue_ready', j.queue)
