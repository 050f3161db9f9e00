-- run_now: operator "run now" of a scheduled job (delayed, or waiting for a retry): ready at once, attempts kept.
-- Primary-key lookup; fenced on state = 'scheduled', so a job claimed, cancelled or finished meanwhile is left alone.
-- A job made ready sends pg_notify('jobqueue_ready', queue) at commit, like an insert (migration 0006_notify).
UPDATE jobqueue_job
SET state = 'ready', run_at = now(),
    errors = errors || jsonb_build_array(jsonb_build_object(
        'kind', 'operator_run_now', 'at', now(), 'previous_state', state, 'by', %(by)s::text,
        'message', 'made ready now by operator'))
WHERE id = %(id)s AND state = 'scheduled'
RETURNING id, pg_notify('jobqueue_ready', queue)
