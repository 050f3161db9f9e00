-- mark_parents: lock the parents of a job enqueued after them, flag them has_children, return their states and results.
-- Primary-key lookups, locked in id order (two enqueues after the same parents never deadlock). The lock holds each
-- parent's outcome until the caller commits, so a parent either finished before (its state is read here) or its
-- finish sees the edges (migration 0015_parents's trigger settles them).
UPDATE jobqueue_job AS j
SET has_children = true
FROM (SELECT id FROM jobqueue_job WHERE id = ANY(%(ids)s::bigint[]) ORDER BY id FOR NO KEY UPDATE) AS p
WHERE j.id = p.id
RETURNING j.id, j.state, j.result
