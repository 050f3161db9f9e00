-- unclaim: give back jobs a claim took over a concurrency limit, before they ran: as if never
-- claimed (the attempt is refunded, run_at kept so they keep their place in claim order, no error
-- entry: nothing happened to them). Fenced on (id, lease_token, state = 'leased'); rows in id
-- order. A job whose cancel was requested ends cancelled. A job made ready sends
-- pg_notify('jobqueue_ready', queue): its key may have room again by the time a worker looks.
UPDATE jobqueue_job AS j
SET state = CASE WHEN j.cancel_requested_at IS NULL THEN 'ready' ELSE 'cancelled' END,
    attempts = greatest(j.attempts - 1, 0),
    finished_at = CASE WHEN j.cancel_requested_at IS NULL THEN NULL ELSE now() END,
    lease_token = NULL, lease_until = NULL
FROM unnest(%(ids)s::bigint[], %(tokens)s::uuid[]) AS r(id, token)
WHERE j.id = r.id AND j.lease_token = r.token AND j.state = 'leased'
RETURNING j.id, CASE WHEN j.state = 'ready' THEN pg_notify('jobqueue_ready', j.queue) END
