-- ordering_lock: take an ordering key's transaction-scoped advisory lock, before enqueue_in_order.sql.
-- No table: the lock is the one enqueue.sql and enqueue_many.sql take for the key. A statement of its own, so the
-- next statement's snapshot, taken after the lock, sees every job of the key its earlier holders enqueued.
SELECT pg_advisory_xact_lock(hashtextextended('jobqueue.ordering_key:' || %(ordering_key)s::text, 0)) IS NULL AS locked
