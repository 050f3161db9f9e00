-- relay_jobs: insert relayed outbox jobs on the queue database, each under the id drawn for it at enqueue.
-- Primary key jobqueue_job_pkey and the partial unique index jobqueue_job_live_dedupe_key are the arbiters:
-- ON CONFLICT DO NOTHING (no target: any unique index) makes a second relay of one row (a relay killed
-- between this insert's commit and its outbox delete) a no-op, and a held dedupe key a skipped job.
-- Rows go in (queue, dedupe_key) byte order, as enqueue_many.sql, so concurrent batches never deadlock.
-- A row is job_json's object (delay_s is read and unused: outbox_put set "at" from it).
-- The statement-level NOTIFY trigger wakes the queue's workers at commit.
WITH batch AS MATERIALIZED (
    SELECT *
    FROM jsonb_to_recordset(%(jobs)s::jsonb) AS b(
        id bigint, queue text, type text, payload jsonb, priority int, tenant_id text,
        at timestamptz, delay_s float8, max_attempts int, timeout_s float8, dedupe_key text,
        ordering_key text, concurrency_key text, concurrency_limit int, trace jsonb)
)
INSERT INTO jobqueue_job (
    id, queue, type, payload, priority, tenant_id, state, run_at, attempts, max_attempts,
    timeout_s, leased_by, dedupe_key, ordering_key, concurrency_key, concurrency_limit, errors,
    dead_reason, created_at, trace
)
SELECT id, queue, type, payload, priority, tenant_id,
       CASE WHEN at > now() THEN 'scheduled' ELSE 'ready' END,
       at, 0, max_attempts, timeout_s, '', dedupe_key, ordering_key, concurrency_key,
       concurrency_limit, '[]'::jsonb, '', now(), trace
FROM batch
ORDER BY queue COLLATE "C", dedupe_key COLLATE "C", id
ON CONFLICT DO NOTHING
RETURNING id
