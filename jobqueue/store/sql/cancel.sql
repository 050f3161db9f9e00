-- cancel: a ready, scheduled, waiting or dead job is cancelled now; a leased one gets a cancel request,
-- which its worker passes to the handler at the next heartbeat and which makes it end cancelled.
-- Primary-key lookup.
UPDATE jobqueue_job
SET state = CASE WHEN state = 'leased' THEN 'leased' ELSE 'cancelled' END,
    cancel_requested_at = CASE WHEN state = 'leased' THEN now() ELSE cancel_requested_at END,
    finished_at = CASE WHEN state = 'leased' THEN finished_at ELSE now() END,
    errors = errors || jsonb_build_array(jsonb_build_object(
        'kind', 'operator_cancel', 'at', now(), 'previous_state', state, 'by', %(by)s::text,
        'message', CASE WHEN state = 'leased' THEN 'cancel requested by operator'
                        ELSE 'cancelled by operator' END))
WHERE id = %(id)s
  AND (state IN ('ready', 'scheduled', 'dead', 'waiting') OR (state = 'leased' AND cancel_requested_at IS NULL))
RETURNING state
