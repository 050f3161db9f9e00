-- defer_many: put claimed jobs back unrun (their dependency's breaker is open) until the given times,
-- giving back the attempt the claim took. Fenced on (id, lease_token, state = 'leased'); primary-key lookups.
-- A job whose cancel was requested ends cancelled.
UPDATE jobqueue_job AS j
SET state = CASE WHEN j.cancel_requested_at IS NULL THEN 'scheduled' ELSE 'cancelled' END,
    run_at = CASE WHEN j.cancel_requested_at IS NULL THEN d.run_at ELSE j.run_at END,
    attempts = greatest(j.attempts - 1, 0),
    finished_at = CASE WHEN j.cancel_requested_at IS NULL THEN NULL
                       ELSE coalesce(%(now)s::timestamptz, now()) END,
    errors = j.errors || jsonb_build_array(jsonb_build_object(
        'kind', 'deferred', 'attempt', j.attempts, 'at', coalesce(%(now)s::timestamptz, now()),
        'worker', j.leased_by, 'message', d.message)),
    lease_token = NULL, lease_until = NULL
FROM unnest(%(ids)s::bigint[], %(tokens)s::uuid[], %(run_ats)s::timestamptz[], %(messages)s::text[])
    AS d(id, token, run_at, message)
WHERE j.id = d.id AND j.lease_token = d.token AND j.state = 'leased'
RETURNING j.id, j.state
