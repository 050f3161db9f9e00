-- cancel_many: operator cancel of many jobs in one statement, row for row what cancel.sql does (issue 33: one each took 1 ms).
-- Primary-key lookups. The first CTE locks the rows in id order, as finish_many and retry_many do, so two bulk actions
-- (or a bulk cancel and a worker's batched finish) never wait on each other in opposite orders.
WITH picked AS (
    SELECT id
    FROM jobqueue_job
    WHERE id = ANY(%(ids)s::bigint[])
      AND (state IN ('ready', 'scheduled', 'dead', 'waiting') OR (state = 'leased' AND cancel_requested_at IS NULL))
    ORDER BY id
    FOR NO KEY UPDATE
)
UPDATE jobqueue_job AS j
SET state = CASE WHEN j.state = 'leased' THEN 'leased' ELSE 'cancelled' END,
    cancel_requested_at = CASE WHEN j.state = 'leased' THEN now() ELSE j.cancel_requested_at END,
    finished_at = CASE WHEN j.state = 'leased' THEN j.finished_at ELSE now() END,
    errors = j.errors || jsonb_build_array(jsonb_build_object(
        'kind', 'operator_cancel', 'at', now(), 'previous_state', j.state, 'by', %(by)s::text,
        'message', CASE WHEN j.state = 'leased' THEN 'cancel requested by operator'
                        ELSE 'cancelled by operator' END))
FROM picked
WHERE j.id = picked.id
  AND (j.state IN ('ready', 'scheduled', 'dead', 'waiting') OR (j.state = 'leased' AND j.cancel_requested_at IS NULL))
RETURNING j.id, j.state
