-- run_now: operator "run now" of a scheduled job (delayed, or waiting for a retry): ready at once, attempts kept.
-- Primary-key lookup; fenced on state = 'scheduled', so a job claimed, cancelled or finished meanwhile is left alone.
-- A job made ready sends pg_notify('jobqueue_ready', queue) at commit, like an insert (migration 0006_notify).
UPDATE jobqueue_job
SET state = 'ready', run_at = now()
WHERE id = %(id)s AND state = 'scheduled'
RETURNING id, pg_notify('jobqueue_ready', queue)
