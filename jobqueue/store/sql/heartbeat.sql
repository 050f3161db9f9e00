-- heartbeat: extend every lease one process still holds, in one statement; lost leases match nothing.
-- Fenced on (id, lease_token, state = 'leased'); primary-key lookups. Also reports cancel requests.
-- The state is tested through coalesce() so that no partial index on it (jobqueue_job_running: few rows
-- by the statistics, many dead entries) can serve the fence instead of the primary key (finish_many.sql).
UPDATE jobqueue_job AS j
SET lease_until = now() + make_interval(secs => %(lease_s)s::float8)
FROM unnest(%(ids)s::bigint[], %(tokens)s::uuid[]) AS h(id, token)
WHERE j.id = h.id AND j.lease_token = h.token AND coalesce(j.state, '') = 'leased'
RETURNING j.id, j.lease_until, j.cancel_requested_at IS NOT NULL AS cancel_requested
