-- ack_many: ack many jobs of one worker in one statement; a lease no longer held matches nothing.
-- Fenced on (id, lease_token, state = 'leased'); primary-key lookups. Cancel-requested jobs end cancelled.
UPDATE jobqueue_job AS j
SET state = CASE WHEN j.cancel_requested_at IS NULL THEN 'succeeded' ELSE 'cancelled' END,
    result = a.result, finished_at = now(),
    errors = CASE WHEN j.cancel_requested_at IS NULL THEN j.errors
                  ELSE j.errors || jsonb_build_array(jsonb_build_object(
                      'kind', 'cancelled', 'attempt', j.attempts, 'at', now(), 'worker', j.leased_by,
                      'message', 'cancel requested while running; the handler completed anyway'))
             END,
    lease_token = NULL, lease_until = NULL
FROM unnest(%(ids)s::bigint[], %(tokens)s::uuid[], %(results)s::jsonb[]) AS a(id, token, result)
WHERE j.id = a.id AND j.lease_token = a.token AND j.state = 'leased'
RETURNING j.id, j.state
