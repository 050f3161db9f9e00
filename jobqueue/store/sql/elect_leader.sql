-- elect_leader: renew this holder's leader lease, or take the lease once it has expired; a row comes back only if this holder leads now.
-- Unique index on jobqueue_leaderlease.name. The fencing token goes up by one whenever the lease changes hands (or lapsed).
INSERT INTO jobqueue_leaderlease AS l (name, holder, fencing_token, expires_at, acquired_at, renewed_at)
SELECT %(name)s, %(holder)s, 1, t.now + make_interval(secs => %(lease_s)s::float8), t.now, t.now
FROM (SELECT coalesce(%(now)s::timestamptz, now()) AS now) AS t
ON CONFLICT (name) DO UPDATE
SET fencing_token = CASE WHEN l.holder = EXCLUDED.holder AND l.fencing_token = %(token)s::bigint
                         THEN l.fencing_token ELSE l.fencing_token + 1 END,
    acquired_at = CASE WHEN l.holder = EXCLUDED.holder AND l.fencing_token = %(token)s::bigint
                       THEN l.acquired_at ELSE EXCLUDED.acquired_at END,
    holder = EXCLUDED.holder,
    expires_at = EXCLUDED.expires_at,
    renewed_at = EXCLUDED.renewed_at
WHERE (l.holder = EXCLUDED.holder AND l.fencing_token = %(token)s::bigint)
   OR l.expires_at <= EXCLUDED.renewed_at
RETURNING l.fencing_token, l.expires_at, l.renewed_at
