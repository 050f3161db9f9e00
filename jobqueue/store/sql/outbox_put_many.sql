-- outbox_put_many: write a batch of jobs to this database's outbox in one statement, in the caller's transaction.
-- No index read: one insert (jobqueue_outbox_relay (target, id) and the unique (target, job_id) are maintained).
-- %(jobs)s are job_json texts, %(delays)s their delay_s: a job without run_at gets now() + delay_s, as outbox_put.sql.
-- One pg_notify('jobqueue_outbox', <target>) wakes the relays listening on this database at commit.
WITH put AS (
    INSERT INTO jobqueue_outbox (target, job_id, job, created_at)
    SELECT %(target)s, (b.job ->> 'id')::bigint,
           CASE WHEN b.job -> 'at' = 'null'::jsonb
                THEN jsonb_set(b.job, '{at}', to_jsonb(now() + make_interval(secs => b.delay_s)))
                ELSE b.job END,
           now()
    FROM unnest(%(jobs)s::text[]::jsonb[], %(delays)s::float8[]) WITH ORDINALITY AS b(job, delay_s, n)
    ORDER BY b.n
    RETURNING created_at
)
SELECT max(put.created_at) AS created_at
FROM put CROSS JOIN (SELECT pg_notify('jobqueue_outbox', %(target)s)) AS woken
