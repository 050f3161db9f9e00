-- reap: return the locked expired leases to the claimable set, or dead-letter those with no attempts left
-- (a job whose cancel was requested ends cancelled).
-- Fenced on (id, lease_token, state = 'leased'); runs in the transaction that locked the rows.
UPDATE jobqueue_job AS j
SET state = CASE WHEN j.cancel_requested_at IS NOT NULL THEN 'cancelled'
                 WHEN r.dead THEN 'dead' ELSE 'scheduled' END,
    dead_reason = CASE WHEN r.dead AND j.cancel_requested_at IS NULL
                       THEN 'attempts_exhausted' ELSE '' END,
    run_at = CASE WHEN r.dead OR j.cancel_requested_at IS NOT NULL THEN j.run_at
                  ELSE coalesce(%(now)s::timestamptz, now()) + make_interval(secs => r.delay_s) END,
    finished_at = CASE WHEN r.dead OR j.cancel_requested_at IS NOT NULL
                       THEN coalesce(%(now)s::timestamptz, now()) END,
    errors = j.errors || jsonb_build_array(jsonb_build_object(
        'kind', 'lease_expired', 'attempt', j.attempts, 'at', coalesce(%(now)s::timestamptz, now()),
        'worker', j.leased_by, 'type', 'LeaseExpired',
        'message', 'lease expired at ' || j.lease_until || ' without an ack (worker crashed or stalled)')),
    lease_token = NULL, lease_until = NULL
FROM unnest(%(ids)s::bigint[], %(tokens)s::uuid[], %(dead)s::boolean[], %(delays)s::float8[])
    AS r(id, token, dead, delay_s)
WHERE j.id = r.id AND j.lease_token = r.token AND j.state = 'leased'
RETURNING j.state
