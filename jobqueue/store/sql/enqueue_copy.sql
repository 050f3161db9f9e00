-- enqueue_copy: the rows of an enqueue_many none of whose jobs has a dedupe or ordering key, streamed (binary COPY);
-- row for row what enqueue_many.sql inserts. Ids, state, run_at and created_at come from enqueue_copy_ids.sql.
-- Unlisted columns take their defaults, as in enqueue_many.sql. The statement-level AFTER INSERT trigger of
-- migration 0006_notify fires for COPY too: one notification per queue at commit.
COPY jobqueue_job (
    id, queue, type, payload, priority, tenant_id, run_at, max_attempts, timeout_s, concurrency_key,
    concurrency_limit, trace, state, attempts, leased_by, errors, dead_reason, created_at
) FROM STDIN (FORMAT BINARY)
