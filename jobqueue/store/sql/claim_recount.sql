-- claim_recount: a claim that did not take turns returned jobs with concurrency keys; this counts,
-- per key, the leased jobs now (as committed, plus this transaction's own), and the lowest limit
-- stored on this claim's jobs of the key. Run right after claim_turn.sql, in its transaction
-- (store/postgres/jobs.py, docs/decisions.md "Enqueue-only concurrency limits are exact").
-- Uses jobqueue_job_conc_running (concurrency_key) over leased rows with a key.
SELECT k.key,
       (SELECT count(*) FROM jobqueue_job AS r
        WHERE r.state = 'leased' AND r.concurrency_key = k.key) AS leased,
       (SELECT min(m.concurrency_limit) FROM jobqueue_job AS m
        WHERE m.id = ANY(%(ids)s::bigint[]) AND m.concurrency_key = k.key) AS stored
FROM unnest(%(keys)s::text[]) AS k(key)
