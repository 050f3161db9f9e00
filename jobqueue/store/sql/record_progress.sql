-- record_progress: a running handler's progress (done of total), shown by status(), the admin and the CLI.
-- Fenced on (id, lease_token, state = 'leased'): a zombie's report matches nothing. Primary-key lookup.
UPDATE jobqueue_job
SET progress_done = %(done)s, progress_total = %(total)s
WHERE id = %(id)s AND lease_token = %(lease_token)s AND state = 'leased'
RETURNING id
