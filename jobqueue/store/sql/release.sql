-- release: give a job back unfinished (graceful shutdown, or unstarted beside a suspect job); the attempt is not spent.
-- Fenced on (id, lease_token, state = 'leased'). A job whose cancel was requested ends cancelled.
-- A job made ready sends pg_notify('jobqueue_ready', queue) at commit, like an insert (migration 0006_notify).
UPDATE jobqueue_job
SET state = CASE WHEN cancel_requested_at IS NULL THEN 'ready' ELSE 'cancelled' END,
    run_at = now(), attempts = greatest(attempts - 1, 0),
    finished_at = CASE WHEN cancel_requested_at IS NULL THEN NULL ELSE now() END,
    errors = errors || jsonb_build_array(jsonb_build_object(
        'kind', 'released', 'attempt', attempts, 'at', now(), 'worker', leased_by,
        'message', %(message)s::text)),
    lease_token = NULL, lease_until = NULL
WHERE id = %(id)s AND lease_token = %(lease_token)s::uuid AND state = 'leased'
RETURNING state, CASE WHEN state = 'ready' THEN pg_notify('jobqueue_ready', queue) END
