-- outbox_take: lock the oldest %(limit)s outbox rows for one queue database, in the relay's transaction.
-- Index jobqueue_outbox_relay (target, id); SKIP LOCKED: relays in many worker processes share the rows.
SELECT id, job_id, job::text AS job, created_at
FROM jobqueue_outbox
WHERE target = %(target)s
ORDER BY id
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED
