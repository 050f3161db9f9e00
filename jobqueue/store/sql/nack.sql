-- nack: the attempt failed; append the error, then dead-letter or schedule the retry the caller decided.
-- Fenced on (id, lease_token, state = 'leased'), so attempts cannot have changed since the claim.
-- A job whose cancel was requested ends cancelled instead of retrying.
UPDATE jobqueue_job
SET state = CASE WHEN cancel_requested_at IS NOT NULL THEN 'cancelled'
                 WHEN %(dead_reason)s::text IS NULL THEN 'scheduled'
                 ELSE 'dead' END,
    dead_reason = CASE WHEN cancel_requested_at IS NOT NULL THEN ''
                       ELSE coalesce(%(dead_reason)s::text, '') END,
    run_at = CASE WHEN cancel_requested_at IS NULL AND %(dead_reason)s::text IS NULL
                  THEN coalesce(%(retry_at)s::timestamptz, now() + make_interval(secs => %(delay_s)s::float8))
                  ELSE run_at END,
    finished_at = CASE WHEN cancel_requested_at IS NULL AND %(dead_reason)s::text IS NULL
                       THEN NULL ELSE now() END,
    errors = errors || jsonb_build_array(%(error)s::jsonb || jsonb_build_object('at', now())),
    lease_token = NULL, lease_until = NULL
WHERE id = %(id)s AND lease_token = %(lease_token)s::uuid AND state = 'leased'
RETURNING state
