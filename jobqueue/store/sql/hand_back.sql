-- hand_back: give back the locked leases of a worker process that died running several jobs: none is
-- charged; each is made ready with its attempt refunded and marked suspect (it next runs alone;
-- jobqueue/worker/deaths.py). A process that died running one job has it charged by finish_many.sql instead.
-- Fenced on (id, lease_token, state = 'leased'); primary-key updates in the transaction that locked
-- the rows (dead_worker_leases.sql). A job whose cancel was requested ends cancelled. A job made ready
-- sends pg_notify('jobqueue_ready', queue).
UPDATE jobqueue_job AS j
SET state = CASE WHEN j.cancel_requested_at IS NOT NULL THEN 'cancelled' ELSE 'ready' END,
    attempts = greatest(j.attempts - 1, 0),
    suspect = TRUE,
    run_at = CASE WHEN j.cancel_requested_at IS NOT NULL THEN j.run_at ELSE now() END,
    finished_at = CASE WHEN j.cancel_requested_at IS NOT NULL THEN now() END,
    errors = j.errors || jsonb_build_array(jsonb_build_object(
        'kind', 'process_died', 'attempt', j.attempts, 'at', now(), 'worker', j.leased_by,
        'type', 'ProcessDied', 'charged', FALSE, 'message', %(message)s::text)),
    lease_token = NULL, lease_until = NULL
FROM unnest(%(ids)s::bigint[], %(tokens)s::uuid[]) AS r(id, token)
WHERE j.id = r.id AND j.lease_token = r.token AND j.state = 'leased'
RETURNING j.state, CASE WHEN j.state = 'ready' THEN pg_notify('jobqueue_ready', j.queue) END
