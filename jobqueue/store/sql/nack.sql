-- nack: the attempt failed; append the error, then dead-letter or schedule the retry the caller decided.
-- Fenced on (id, lease_token, state = 'leased'), so attempts cannot have changed since the claim.
UPDATE jobqueue_job
SET state = CASE WHEN %(dead_reason)s::text IS NULL THEN 'scheduled' ELSE 'dead' END,
    dead_reason = coalesce(%(dead_reason)s::text, ''),
    run_at = CASE WHEN %(dead_reason)s::text IS NULL
                  THEN coalesce(%(retry_at)s::timestamptz, now() + make_interval(secs => %(delay_s)s::float8))
                  ELSE run_at END,
    finished_at = CASE WHEN %(dead_reason)s::text IS NULL THEN NULL ELSE now() END,
    errors = errors || jsonb_build_array(%(error)s::jsonb || jsonb_build_object('at', now())),
    lease_token = NULL, lease_until = NULL
WHERE id = %(id)s AND lease_token = %(lease_token)s::uuid AND state = 'leased'
RETURNING state
