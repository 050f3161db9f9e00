-- save_checkpoint: a running handler's checkpoint, which the next attempt resumes from.
-- Fenced on (id, lease_token, state = 'leased'): a zombie's checkpoint matches nothing and writes nothing.
-- Primary-key lookup.
UPDATE jobqueue_job
SET checkpoint = %(state)s::jsonb, checkpoint_at = now()
WHERE id = %(id)s AND lease_token = %(lease_token)s AND state = 'leased'
RETURNING id
