-- outbox_put: write one job to this database's outbox, in the caller's transaction (the job commits with its rows).
-- No index read: one insert (jobqueue_outbox_relay (target, id) and the unique (target, job_id) are maintained).
-- A job without run_at gets now() + delay_s here, by this clock: its delay counts from the enqueue, not the relay.
-- pg_notify('jobqueue_outbox', <target>) wakes the relays listening on this database at commit (none at rollback).
WITH put AS (
    INSERT INTO jobqueue_outbox (target, job_id, job, created_at)
    VALUES (
        %(target)s,
        %(job_id)s,
        CASE WHEN %(job)s::jsonb -> 'at' = 'null'::jsonb
             THEN jsonb_set(%(job)s::jsonb, '{at}', to_jsonb(now() + make_interval(secs => %(delay_s)s)))
             ELSE %(job)s::jsonb END,
        now()
    )
    RETURNING created_at
)
SELECT put.created_at FROM put CROSS JOIN (SELECT pg_notify('jobqueue_outbox', %(target)s)) AS woken
