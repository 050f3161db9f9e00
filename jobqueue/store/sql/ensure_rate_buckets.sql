-- ensure_rate_buckets: create, full, the token buckets a claim of these queues may draw on and
-- that are not there yet (store/postgres/limits.py; store/shared.py's claim_again): the declared limiters,
-- and with a tenant default the bucket of each tenant with claimable jobs in these queues (a
-- loose index scan of jobqueue_job_claim, as claim.sql's "tenants"). Run before the claim, in
-- its own autocommit statement, so the claim finds every bucket and never holds a job back
-- only because its tenant is new. Existing rows are left alone (no lock, no write).
WITH RECURSIVE
queues AS (
    SELECT q.name FROM unnest(%(queues)s::text[]) AS q(name)
    UNION
    -- A "*" worker: every queue with claimable jobs (read only with a tenant default).
    SELECT DISTINCT j.queue FROM jobqueue_job AS j
    WHERE %(every)s AND %(rl_tenant_rate)s::float8 IS NOT NULL
      AND j.state IN ('ready', 'scheduled')
),
tenants AS (
    SELECT q.name AS queue,
           (SELECT min(j.tenant_id) FROM jobqueue_job AS j
            WHERE j.queue = q.name AND j.state IN ('ready', 'scheduled')) AS tenant_id
    FROM queues AS q
    WHERE %(rl_tenant_rate)s::float8 IS NOT NULL
    UNION ALL
    SELECT t.queue,
           (SELECT min(j.tenant_id) FROM jobqueue_job AS j
            WHERE j.queue = t.queue AND j.state IN ('ready', 'scheduled')
              AND j.tenant_id > t.tenant_id)
    FROM tenants AS t
    WHERE t.tenant_id IS NOT NULL
),
wanted AS (
    SELECT s.key, s.burst
    FROM unnest(%(rl_keys)s::text[], %(rl_bursts)s::float8[]) AS s(key, burst)
    UNION
    SELECT %(rl_tenant_prefix)s || d.tenant_id, %(rl_tenant_burst)s::float8
    FROM (SELECT DISTINCT tenant_id FROM tenants WHERE tenant_id <> '') AS d
    WHERE d.tenant_id <> ALL(%(rl_tenant_own)s::text[])
)
INSERT INTO jobqueue_rate_limit (key, tokens, refreshed_at)
SELECT w.key, w.burst, coalesce(%(now)s::timestamptz, now())
FROM wanted AS w
WHERE NOT EXISTS (SELECT 1 FROM jobqueue_rate_limit AS b WHERE b.key = w.key)
ORDER BY w.key
ON CONFLICT (key) DO NOTHING
