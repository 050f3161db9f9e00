-- ack_many: mark many jobs of one worker succeeded in one statement; a lease no longer held matches nothing.
-- Fenced on (id, lease_token, state = 'leased'); primary-key lookups.
UPDATE jobqueue_job AS j
SET state = 'succeeded', result = a.result, finished_at = now(),
    lease_token = NULL, lease_until = NULL
FROM unnest(%(ids)s::bigint[], %(tokens)s::uuid[], %(results)s::jsonb[]) AS a(id, token, result)
WHERE j.id = a.id AND j.lease_token = a.token AND j.state = 'leased'
RETURNING j.id
