-- finish_many: record the outcomes of many runs (succeeded, scheduled or dead, in any mix) in one statement:
-- the worker's, jobqueue.ack/nack's, the reaper's, and a dead process's charged job (store/finishing.py).
-- Fenced per row on (id, lease_token, state = 'leased'); primary-key lookups. A lease no longer held matches nothing.
-- A job whose cancel was requested while it ran ends cancelled (an ack's result kept, and an entry saying so).
-- clock.at is now() unless a test stands in for the database clock.
UPDATE jobqueue_job AS j
SET state = CASE WHEN j.cancel_requested_at IS NOT NULL THEN 'cancelled' ELSE o.state END,
    result = CASE WHEN o.state = 'succeeded' THEN o.result ELSE j.result END,
    dead_reason = CASE WHEN o.state = 'dead' AND j.cancel_requested_at IS NULL
                       THEN coalesce(o.dead_reason, '') ELSE '' END,
    run_at = CASE WHEN o.state = 'scheduled' AND j.cancel_requested_at IS NULL
                  THEN coalesce(o.retry_at, clock.at + make_interval(secs => o.delay_s))
                  ELSE j.run_at END,
    finished_at = CASE WHEN o.state = 'scheduled' AND j.cancel_requested_at IS NULL
                       THEN NULL ELSE clock.at END,
    errors = j.errors || CASE
        WHEN o.error IS NOT NULL THEN jsonb_build_array(o.error || jsonb_build_object('at', clock.at))
        WHEN j.cancel_requested_at IS NOT NULL THEN jsonb_build_array(jsonb_build_object(
            'kind', 'cancelled', 'attempt', j.attempts, 'at', clock.at, 'worker', j.leased_by,
            'message', 'cancel requested while running; the handler completed anyway'))
        ELSE '[]'::jsonb END,
    lease_token = NULL, lease_until = NULL
FROM unnest(%(ids)s::bigint[], %(tokens)s::uuid[], %(states)s::text[], %(results)s::jsonb[],
            %(errors)s::jsonb[], %(dead_reasons)s::text[], %(retry_ats)s::timestamptz[],
            %(delays)s::float8[])
         AS o(id, token, state, result, error, dead_reason, retry_at, delay_s),
     (SELECT coalesce(%(now)s::timestamptz, now()) AS at) AS clock
WHERE j.id = o.id AND j.lease_token = o.token AND j.state = 'leased'
RETURNING j.id, j.state
