-- cancel: operator cancel of a ready, scheduled, leased or dead job; a leased job's worker is fenced out.
-- Primary-key lookup.
UPDATE jobqueue_job
SET state = 'cancelled', finished_at = now(), lease_token = NULL, lease_until = NULL
WHERE id = %(id)s AND state IN ('ready', 'scheduled', 'leased', 'dead')
RETURNING id
