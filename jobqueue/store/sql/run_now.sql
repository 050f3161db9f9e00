-- run_now: operator "run now" of a scheduled job (delayed, or waiting for a retry): ready at once, attempts kept.
-- Primary-key lookup; fenced on state = 'scheduled', so a job claimed, cancelled or finished meanwhile is left alone.
UPDATE jobqueue_job
SET state = 'ready', run_at = now()
WHERE id = %(id)s AND state = 'scheduled'
RETURNING id
