-- ack: the job succeeded; store its result. A job whose cancel was requested ends cancelled instead.
-- Fenced on (id, lease_token, state = 'leased'): a zombie's late ack changes nothing.
UPDATE jobqueue_job
SET state = CASE WHEN cancel_requested_at IS NULL THEN 'succeeded' ELSE 'cancelled' END,
    result = %(result)s::jsonb, finished_at = now(),
    errors = CASE WHEN cancel_requested_at IS NULL THEN errors
                  ELSE errors || jsonb_build_array(jsonb_build_object(
                      'kind', 'cancelled', 'attempt', attempts, 'at', now(), 'worker', leased_by,
                      'message', 'cancel requested while running; the handler completed anyway'))
             END,
    lease_token = NULL, lease_until = NULL
WHERE id = %(id)s AND lease_token = %(lease_token)s::uuid AND state = 'leased'
RETURNING state
