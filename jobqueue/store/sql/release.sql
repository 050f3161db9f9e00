-- release: give a job back at graceful shutdown; the attempt it was on is not spent.
-- Fenced on (id, lease_token, state = 'leased').
UPDATE jobqueue_job
SET state = 'ready', run_at = now(), attempts = greatest(attempts - 1, 0),
    errors = errors || jsonb_build_array(jsonb_build_object(
        'kind', 'released', 'attempt', attempts, 'at', now(), 'worker', leased_by,
        'message', 'released at shutdown; the attempt is not counted')),
    lease_token = NULL, lease_until = NULL
WHERE id = %(id)s AND lease_token = %(lease_token)s::uuid AND state = 'leased'
