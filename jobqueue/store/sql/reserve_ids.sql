-- reserve_ids: draw %(n)s job ids for an enqueue_many that takes several statements, after the batch's ordering-key locks.
-- No index: the id sequence, and one transaction-scoped advisory lock per ordering key, taken sorted (as enqueue_many.sql).
-- The ids come back ascending, one per job in input order, so the batch keeps enqueue order while its chunks go in
-- dedupe-key order; the locks come first so two transactions enqueueing one ordering key commit in id order.
WITH locked AS MATERIALIZED (
    SELECT count(pg_advisory_xact_lock(hashtextextended('jobqueue.ordering_key:' || k.key, 0))) AS n
    FROM (SELECT DISTINCT unnest(%(ordering_keys)s::text[]) AS key ORDER BY 1) AS k
)
SELECT nextval((SELECT pg_get_serial_sequence('jobqueue_job', 'id'))::regclass) AS id
FROM generate_series(1, %(n)s) CROSS JOIN locked AS l
WHERE l.n >= 0
ORDER BY id
