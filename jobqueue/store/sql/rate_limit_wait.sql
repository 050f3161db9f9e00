-- rate_limit_wait: seconds until the soonest drained token bucket has a token again (the worker's
-- wake-up; jobqueue/store/postgres/limits.py). Drained: less than one token after refilling to the
-- time of the caller's claim, %(since_s)s seconds ago; one that has refilled since waits 0 (the
-- claim may have left jobs for it, and a --burst worker must claim again before exiting).
-- Reads the buckets of the declared limits only (a few rows, by primary key, and the tenants'
-- buckets by key prefix); locks nothing.
WITH limits AS (
    SELECT b.key, b.tokens, b.refreshed_at,
           coalesce(s.rate, CASE WHEN b.key LIKE %(rl_tenant_prefix)s || '%%'
                                  AND substr(b.key, length(%(rl_tenant_prefix)s) + 1)
                                      <> ALL(%(rl_tenant_own)s::text[])
                                 THEN %(rl_tenant_rate)s::float8 END) AS rate
    FROM jobqueue_rate_limit AS b
    LEFT JOIN unnest(%(rl_keys)s::text[], %(rl_rates)s::float8[]) AS s(key, rate)
        ON s.key = b.key
    WHERE b.tokens < 1
)
SELECT min(greatest(0, (1 - l.tokens) / l.rate - extract(epoch FROM now() - l.refreshed_at)))
       AS wait_s
FROM limits AS l
WHERE l.rate IS NOT NULL
  AND (1 - l.tokens) / l.rate > extract(epoch FROM now() - l.refreshed_at) - %(since_s)s
