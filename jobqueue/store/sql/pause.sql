-- pause: pause a queue or a job type (kind 'queue' / 'type'); a second pause keeps the first's row.
-- Unique index jobqueue_pause_kind_name (kind, name); returns the row in force and whether this made it.
WITH made AS (
    INSERT INTO jobqueue_pause (kind, name, paused_by, paused_at, reason)
    VALUES (%(kind)s, %(name)s, %(by)s, now(), %(reason)s)
    ON CONFLICT (kind, name) DO NOTHING
    RETURNING kind, name, paused_by, paused_at, reason
)
SELECT m.kind, m.name, m.paused_by, m.paused_at, m.reason, true AS created
FROM made AS m
UNION ALL
SELECT p.kind, p.name, p.paused_by, p.paused_at, p.reason, false AS created
FROM jobqueue_pause AS p
WHERE p.kind = %(kind)s AND p.name = %(name)s AND NOT EXISTS (SELECT 1 FROM made)
