-- add_batch_members: make just-enqueued jobs members of a batch and count them pending, in the caller's transaction.
-- Primary-key lookups; a job already in a batch is left out. Setting batch_id does not fire the batch trigger (it
-- fires on UPDATE OF state only).
WITH joined AS (
    UPDATE jobqueue_job
    SET batch_id = %(batch_id)s
    WHERE id = ANY(%(ids)s::bigint[]) AND batch_id IS NULL
    RETURNING id
), counted AS (
    SELECT count(*) AS n FROM joined
)
UPDATE jobqueue_batch AS b
SET total = b.total + c.n, pending = b.pending + c.n
FROM counted AS c
WHERE b.id = %(batch_id)s
RETURNING c.n
