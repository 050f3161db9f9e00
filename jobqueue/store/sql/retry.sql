-- retry: operator retry of a dead or cancelled job: ready now, a fresh attempt budget, history kept.
-- Primary-key lookup; the partial unique index refuses it if a live job now holds its dedupe key.
-- A job made ready sends pg_notify('jobqueue_ready', queue) at commit, like an insert (migration 0006_notify).
UPDATE jobqueue_job
SET state = 'ready', run_at = now(), attempts = 0, finished_at = NULL, dead_reason = '',
    lease_token = NULL, lease_until = NULL, result = NULL, cancel_requested_at = NULL,
    errors = errors || jsonb_build_array(jsonb_build_object(
        'kind', 'operator_retry', 'at', now(), 'previous_state', state,
        'message', 'retried by operator', 'by', %(by)s::text))
WHERE id = %(id)s AND state IN ('dead', 'cancelled')
RETURNING id, pg_notify('jobqueue_ready', queue)
