-- heartbeat: extend every lease one process still holds, in one statement; lost leases match nothing.
-- Fenced on (id, lease_token, state = 'leased'); primary-key lookups. Also reports cancel requests.
UPDATE jobqueue_job AS j
SET lease_until = now() + make_interval(secs => %(lease_s)s::float8)
FROM unnest(%(ids)s::bigint[], %(tokens)s::uuid[]) AS h(id, token)
WHERE j.id = h.id AND j.lease_token = h.token AND j.state = 'leased'
RETURNING j.id, j.lease_until, j.cancel_requested_at IS NOT NULL AS cancel_requested
