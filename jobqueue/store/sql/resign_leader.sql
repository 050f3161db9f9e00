-- resign_leader: let this holder's leader lease lapse now (graceful stop), so another takes over at its next tick.
-- Unique index on jobqueue_leaderlease.name; fenced on (holder, fencing_token).
UPDATE jobqueue_leaderlease
SET expires_at = now()
WHERE name = %(name)s AND holder = %(holder)s AND fencing_token = %(token)s::bigint
