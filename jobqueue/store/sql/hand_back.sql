-- hand_back: return the locked leases of a worker process that died under its supervisor. Alone
-- (company false) its job is charged: retried after backoff, or dead; in company each is refunded,
-- made ready and marked suspect (it next runs alone; jobqueue/deaths.py).
-- Fenced on (id, lease_token, state = 'leased'); primary-key updates in the transaction that locked
-- the rows (dead_worker_leases.sql). A job made ready sends pg_notify('jobqueue_ready', queue).
UPDATE jobqueue_job AS j
SET state = CASE WHEN j.cancel_requested_at IS NOT NULL THEN 'cancelled'
                 WHEN r.dead THEN 'dead'
                 WHEN %(company)s THEN 'ready' ELSE 'scheduled' END,
    dead_reason = CASE WHEN r.dead AND j.cancel_requested_at IS NULL
                       THEN 'attempts_exhausted' ELSE '' END,
    attempts = CASE WHEN %(company)s THEN greatest(j.attempts - 1, 0) ELSE j.attempts END,
    suspect = j.suspect OR %(company)s,
    run_at = CASE WHEN r.dead OR j.cancel_requested_at IS NOT NULL THEN j.run_at
                  ELSE now() + make_interval(secs => r.delay_s) END,
    finished_at = CASE WHEN r.dead OR j.cancel_requested_at IS NOT NULL THEN now() END,
    errors = j.errors || jsonb_build_array(jsonb_build_object(
        'kind', 'process_died', 'attempt', j.attempts, 'at', now(), 'worker', j.leased_by,
        'type', 'ProcessDied', 'charged', NOT %(company)s, 'message', %(message)s::text)),
    lease_token = NULL, lease_until = NULL
FROM unnest(%(ids)s::bigint[], %(tokens)s::uuid[], %(dead)s::boolean[], %(delays)s::float8[])
    AS r(id, token, dead, delay_s)
WHERE j.id = r.id AND j.lease_token = r.token AND j.state = 'leased'
RETURNING j.state, CASE WHEN j.state = 'ready' THEN pg_notify('jobqueue_ready', j.queue) END
