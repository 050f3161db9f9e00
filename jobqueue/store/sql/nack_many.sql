-- nack_many: record many failed attempts of one worker in one statement, each row exactly as nack.sql does.
-- Fenced per row on (id, lease_token, state = 'leased'); primary-key lookups. A lease no longer held matches nothing.
UPDATE jobqueue_job AS j
SET state = CASE WHEN j.cancel_requested_at IS NOT NULL THEN 'cancelled'
                 WHEN n.dead_reason IS NULL THEN 'scheduled'
                 ELSE 'dead' END,
    dead_reason = CASE WHEN j.cancel_requested_at IS NOT NULL THEN ''
                       ELSE coalesce(n.dead_reason, '') END,
    run_at = CASE WHEN j.cancel_requested_at IS NULL AND n.dead_reason IS NULL
                  THEN coalesce(n.retry_at, now() + make_interval(secs => n.delay_s))
                  ELSE j.run_at END,
    finished_at = CASE WHEN j.cancel_requested_at IS NULL AND n.dead_reason IS NULL
                       THEN NULL ELSE now() END,
    errors = j.errors || jsonb_build_array(n.error || jsonb_build_object('at', now())),
    lease_token = NULL, lease_until = NULL
FROM unnest(%(ids)s::bigint[], %(tokens)s::uuid[], %(errors)s::jsonb[], %(dead_reasons)s::text[],
            %(retry_ats)s::timestamptz[], %(delays)s::float8[])
    AS n(id, token, error, dead_reason, retry_at, delay_s)
WHERE j.id = n.id AND j.lease_token = n.token AND j.state = 'leased'
RETURNING j.id, j.state
