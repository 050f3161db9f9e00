-- ack: the job succeeded; store its result.
-- Fenced on (id, lease_token, state = 'leased'): a zombie's late ack changes nothing.
UPDATE jobqueue_job
SET state = 'succeeded', result = %(result)s::jsonb, finished_at = now(),
    lease_token = NULL, lease_until = NULL
WHERE id = %(id)s AND lease_token = %(lease_token)s::uuid AND state = 'leased'
