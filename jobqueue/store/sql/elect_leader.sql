-- elect_leader: renew this holder's leader lease, or take the lease once it has expired; a row comes back only if this holder leads now.
-- Unique index on jobqueue_leaderlease.name. The fencing token goes up by one whenever the lease changes hands (or lapsed).
INSERT INTO jobqueue_leaderlease AS l (name, holder, fencing_token, expires_at, acquired_at, renewed_at)
SELECT %(name)s, %(holder)s, 1, t.now + make_interval(secs => %(lease_s)s::float8), t.now, t.now
FROM (SELECT coalesce(%(now)s::timestamptz, now()) AS now) AS t
-- A follower's ask while another's lease runs is a read: no insert is tried, so no row lock and
-- no transaction id (every host asks about once a second; the lock made each ask a write).
WHERE NOT EXISTS (
    SELECT 1 FROM jobqueue_leaderlease AS c
    WHERE c.name = %(name)s AND c.expires_at > t.now
      AND (c.holder <> %(holder)s OR c.fencing_token IS DISTINCT FROM %(token)s::bigint)
)
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
