-- reserve_ids: draw %(n)s job ids for an enqueue_many that takes several statements (or an outbox batch).
-- No index: the id sequence. The ids come back ascending, one per job in input order, so the batch keeps enqueue
-- order while its chunks go in dedupe-key order. No lock on ordering keys (issue 33: a lock held to the caller's
-- commit deadlocked two transactions taking two keys in opposite orders).
SELECT nextval((SELECT pg_get_serial_sequence('jobqueue_job', 'id'))::regclass) AS id
FROM generate_series(1, %(n)s)
ORDER BY id
