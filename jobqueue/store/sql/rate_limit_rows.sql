-- rate_limit_rows: every token bucket with its declared limit, its tokens refilled to now, and the
-- due claimable jobs it holds back (only while it has less than one token), counted up to
-- %(cap)s (the dashboard and the metrics; jobqueue/store/postgres/limits.py). The held count of a type
-- or dependency bucket reads the claimable jobs of its types; a tenant bucket's, that tenant's
-- jobs through jobqueue_job_claim. Buckets without a declared limit any more are left out.
WITH limits AS (
    SELECT b.key, b.tokens, b.refreshed_at, s.rate, s.burst, s.text
    FROM jobqueue_rate_limit AS b
    JOIN unnest(%(keys)s::text[], %(rates)s::float8[], %(bursts)s::float8[], %(texts)s::text[])
         AS s(key, rate, burst, text) ON s.key = b.key
    UNION ALL
    SELECT b.key, b.tokens, b.refreshed_at, %(rl_tenant_rate)s::float8,
           %(rl_tenant_burst)s::float8, %(tenant_text)s
    FROM jobqueue_rate_limit AS b
    WHERE %(rl_tenant_rate)s::float8 IS NOT NULL
      AND b.key LIKE %(rl_tenant_prefix)s || '%%'
      AND b.key <> ALL(%(keys)s::text[])
      AND substr(b.key, length(%(rl_tenant_prefix)s) + 1) <> ALL(%(rl_tenant_own)s::text[])
),
refilled AS (
    SELECT l.*, least(l.burst, l.tokens + l.rate * greatest(0, extract(epoch FROM
                now() - l.refreshed_at))) AS now_tokens
    FROM limits AS l
)
SELECT r.key, r.rate, r.burst, r.text, r.now_tokens AS tokens,
       CASE WHEN r.now_tokens >= 1 THEN 0 ELSE (
           SELECT count(*) FROM (
               SELECT 1 FROM jobqueue_job AS j
               WHERE j.state IN ('ready', 'scheduled') AND j.run_at <= now()
                 AND (j.type IN (SELECT k.type FROM unnest(%(rl_types)s::text[],
                                                           %(rl_type_keys)s::text[]) AS k(type, key)
                                 WHERE k.key = r.key)
                      OR (r.key LIKE %(rl_tenant_prefix)s || '%%'
                          AND j.tenant_id = substr(r.key, length(%(rl_tenant_prefix)s) + 1)))
               LIMIT %(cap)s) AS c) END AS held
FROM refilled AS r
ORDER BY r.key
