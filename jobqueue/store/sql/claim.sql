-- claim: lease up to max_jobs due jobs of the given queues, sharing them fairly.
--
-- Order of service (jobqueue/limits/fairness.py and docs/fairness.md):
--   across queues: by weighted-fair tag start[q] + k/weight[q] (k = the job's rank in its queue),
--     or, with strict, by the queue's position in the list;
--   within a queue: priority DESC, then the tenant with the lowest (leased jobs + the ones this
--     claim takes) / weight (JOBQUEUE["TENANT_WEIGHTS"], default 1: weighted fair queueing over
--     running jobs; with equal weights, the tenant with the fewest), then run_at, then id;
--   a tenant never exceeds its cap of leased jobs (all queues, all workers; the caller serializes
--     capped claims with an advisory lock so the leased counts read here are current);
--   concurrency limits (issue 18, jobqueue/limits/concurrency.py): a job with a concurrency_key is
--     never claimed while its key has concurrency_limit leased jobs (all queues, all workers; an
--     override from JOBQUEUE["CONCURRENCY_LIMITS"] wins over the limit stored on the job), and
--     one claim takes no more than the key's room. Checked per row in "heads", so a key at its
--     limit is read past, never blocking the jobs behind it; the room is applied in
--     "per_tenant" (nk: the job's rank among its key's heads).
--     Leased rows count whoever holds them: a killed worker's slots come back when the reaper
--     expires its leases. Claims that may meet limits take turns (claim_turn.sql), as capped ones;
--   a job with an ordering_key waits while an earlier live job of that key exists or any job of
--     that key is leased;
--   a paused queue or job type (a jobqueue_pause row) gives nothing: read here, in the claim, so
--     a pause binds every worker from its next claim and needs no cache (issue 17).
--
-- Index use: jobqueue_job_claim (queue, tenant_id, priority DESC, run_at, id) over claimable rows
-- only. "tenants" walks it as a loose index scan (one probe per tenant with claimable jobs, not a
-- read of every row); "heads" reads each (queue, tenant)'s first jobs in claim order; running
-- counts use jobqueue_job_running (tenant_id) over leased rows; running per concurrency key uses
-- jobqueue_job_conc_running (concurrency_key) over leased rows with a key (one probe per keyed
-- row read, over at most that key's running jobs); ordering keys use
-- jobqueue_job_ordering (ordering_key, id) over live rows; pauses use jobqueue_pause_kind_name
-- (kind, name), a table of a few rows.
--
-- Rate limits (issue 18; jobqueue/settings/rates.py, docs/decisions.md "Rate limits in the claim"):
--   a job waits, claimable-later and without spending an attempt, while any token bucket it
--   falls under (its type's, its dependency's, its tenant's) has less than one token; the buckets
--   are refilled to now and spent in this statement ("rate_*" CTEs), so workers on every host
--   share them by the database clock. Drained buckets are read from the snapshot ("rate_out");
--   the buckets of the candidates that can be picked (the first max_jobs of each queue), and
--   only those, are locked in key order and read as committed ("rate_buckets"): no token is
--   spent twice, and since a claim waits for nothing else while holding a bucket (job rows are
--   taken with SKIP LOCKED) and takes buckets in one order, claims cannot
--   deadlock. The store creates missing buckets after a short claim (ensure_rate_buckets.sql);
--   one still missing counts as empty. The lines between
--   "rates{" and "}rates" are sent only when some limit is declared (store/sqltext.py): the
--   claim without them stays within psycopg's query cache.
--
-- Text budget: the compacted statement plus the transaction-limits prefix must fit psycopg's
-- 4,096-character query cache (tests/store/test_sqltext.py); after issue 18's limits and weights and
-- the batch_id returned for finish_many's text (store/postgres/finishing.py) it has 15 to spare.
-- Comments are free (stripped before sending).
--
-- "heads" row-locks what it reads with SKIP LOCKED, so concurrent claims never wait on each other
-- or hand out the same job, and a claim reads past the rows another claim holds instead of coming
-- back empty. A row another claim leased since this statement's snapshot fails the re-checked
-- state condition and is skipped. Rows locked but not picked are unlocked at commit.
WITH RECURSIVE
queues AS (
    SELECT q.name, q.weight, q.start, q.pos
    FROM unnest(%(queues)s::text[], %(weights)s::float8[], %(start)s::float8[])
         WITH ORDINALITY AS q(name, weight, start, pos)
    WHERE NOT EXISTS (SELECT 1 FROM jobqueue_pause AS p WHERE p.kind = 'queue' AND p.name = q.name)
),
tenants AS (
    SELECT q.name AS queue,
           (SELECT min(j.tenant_id) FROM jobqueue_job AS j
            WHERE j.queue = q.name AND j.state IN ('ready', 'scheduled')) AS tenant_id
    FROM queues AS q
    UNION ALL
    SELECT t.queue,
           (SELECT min(j.tenant_id) FROM jobqueue_job AS j
            WHERE j.queue = t.queue AND j.state IN ('ready', 'scheduled')
              AND j.tenant_id > t.tenant_id)
    FROM tenants AS t
    WHERE t.tenant_id IS NOT NULL
),
capped AS (
    SELECT d.tenant_id,
           CASE WHEN o.tenant_id IS NOT NULL THEN o.cap  -- an override; NULL exempts the tenant
                WHEN d.tenant_id = '' THEN NULL
                ELSE %(default_cap)s::int END AS cap
    FROM (SELECT DISTINCT tenant_id FROM tenants WHERE tenant_id IS NOT NULL) AS d
    LEFT JOIN unnest(%(cap_tenants)s::text[], %(cap_values)s::int[]) AS o(tenant_id, cap)
        ON o.tenant_id = d.tenant_id
),
load AS MATERIALIZED (
    -- Leased jobs per tenant matter only for a cap or to choose between tenants; with one
    -- uncapped tenant (the common case of no tenants at all) they are not counted.
    -- MATERIALIZED: counted once per tenant. Inlined, the count ran once per head row (over 100
    -- tenants, 2,500 probes and 5,000 buffer reads of a 25-job claim's 10,900).
    SELECT c.tenant_id, c.cap,
           CASE WHEN c.cap IS NOT NULL OR (SELECT count(*) FROM capped) > 1
                THEN (SELECT count(*) FROM jobqueue_job AS l
                      WHERE l.state = 'leased' AND l.tenant_id = c.tenant_id)
                ELSE 0 END AS running
    FROM capped AS c
),
-- rates{
rate_limits AS (
    -- The buckets this claim may draw on: the declared ones, and the tenant default's bucket of
    -- each tenant with claimable jobs but no override.
    SELECT s.key, s.rate, s.burst
    FROM unnest(%(rl_keys)s::text[], %(rl_rates)s::float8[], %(rl_bursts)s::float8[])
         AS s(key, rate, burst)
    UNION ALL
    SELECT 'tenant:' || d.tenant_id, %(rl_tenant_rate)s::float8, %(rl_tenant_burst)s::float8
    FROM (SELECT DISTINCT tenant_id FROM tenants WHERE tenant_id <> '') AS d
    WHERE %(rl_tenant_rate)s::float8 IS NOT NULL AND d.tenant_id <> ALL(%(rl_tenant_own)s::text[])
),
rate_keys AS (
    SELECT k.type, k.key FROM unnest(%(rl_types)s::text[], %(rl_type_keys)s::text[]) AS k(type, key)
),
rate_out AS MATERIALIZED (
    -- The buckets that turn jobs away: drained (less than one token, refilled to now; a burst is
    -- at least 1) or missing, as of this statement's snapshot, unlocked; each with the types it
    -- limits (none: a tenant's). Computed once per claim, so a limit that binds nothing (this
    -- is then empty) costs each row "heads" reads one look at an empty set.
    SELECT r.key, k.type
    FROM rate_limits AS r
    LEFT JOIN jobqueue_rate_limit AS b ON b.key = r.key
    LEFT JOIN rate_keys AS k ON k.key = r.key
    WHERE b.key IS NULL OR b.tokens + r.rate * greatest(0, extract(epoch FROM
          coalesce(%(now)s::timestamptz, now()) - b.refreshed_at)) < 1
),
-- }rates
heads AS (
    SELECT h.id, h.priority, h.run_at, h.room, t.queue, t.tenant_id, l.cap, l.running,
           -- One claim takes at most a key's room of its jobs, across queues and tenants.
           row_number() OVER (PARTITION BY h.ck ORDER BY h.priority DESC, h.run_at, h.id) AS nk
    FROM tenants AS t
    JOIN load AS l ON l.tenant_id = t.tenant_id
    CROSS JOIN LATERAL (
        SELECT j.id, j.priority, j.run_at, j.concurrency_key AS ck, k.room
        FROM jobqueue_job AS j
        -- Concurrency limits: the key's room, its limit (the setting's override from the
        -- %(limits)s object, else the job's) less its leased jobs. NULL: no key (or no limit).
        CROSS JOIN LATERAL (
            SELECT CASE WHEN j.concurrency_key IS NOT NULL THEN
                coalesce((%(limits)s::jsonb->>j.concurrency_key)::int, j.concurrency_limit)
                - (SELECT count(*) FROM jobqueue_job AS r
                   WHERE r.state = 'leased' AND r.concurrency_key = j.concurrency_key) END AS room
        ) AS k
        WHERE j.queue = t.queue
          AND j.tenant_id = t.tenant_id
          AND j.state IN ('ready', 'scheduled')
          AND j.run_at <= coalesce(%(now)s::timestamptz, now())
          AND NOT EXISTS (SELECT 1 FROM jobqueue_pause AS p
                          WHERE p.kind = 'type' AND p.name = j.type)
          AND (j.ordering_key IS NULL OR NOT EXISTS (
                SELECT 1 FROM jobqueue_job AS o
                WHERE o.ordering_key = j.ordering_key
                  AND o.state IN ('leased', 'ready', 'scheduled')
                  AND (o.id < j.id OR o.state = 'leased')))
          -- A job whose key is at its limit is read past (not claimed and handed back), so
          -- the jobs behind it are served.
          -- (IS NULL first: the planner then estimates nearly every row passes, as it does.)
          AND (j.concurrency_key IS NULL OR k.room > 0)
          -- rates{
          -- (OFFSET 0: a subplan, not an anti join, which the planner would cost as turning
          -- away nearly every row, walking the whole index for the LIMIT: seconds with JIT.)
          AND NOT EXISTS (SELECT 1 FROM rate_out AS o
                          WHERE o.type = j.type OR o.key = 'tenant:' || j.tenant_id OFFSET 0)
          -- }rates
        ORDER BY j.priority DESC, j.run_at, j.id
        -- A constant LIMIT, not "room left under the cap": the planner would estimate an
        -- expression LIMIT at a tenth of the table, and that inflated cost switches on JIT
        -- compilation, seconds per claim. The cap is applied in "ranked".
        LIMIT %(max_jobs)s
        FOR UPDATE OF j SKIP LOCKED
    ) AS h
    WHERE l.cap IS NULL OR l.cap > l.running
),
per_tenant AS (
    SELECT h.*,
           -- nt: the job's rank among its tenant's heads
           row_number() OVER (PARTITION BY h.tenant_id
                              ORDER BY h.priority DESC, h.run_at, h.id) AS nt
    FROM heads AS h
    WHERE h.room IS NULL OR h.nk <= h.room
),
ranked AS (
    SELECT p.id, p.queue, q.pos, q.weight, q.start,
           row_number() OVER (PARTITION BY p.queue
                              ORDER BY p.priority DESC,
                                       -- the tenant's weight: %(tenant_weights)s, default 1
                                       (p.running + p.nt)
                                       / coalesce((%(tenant_weights)s::jsonb->>p.tenant_id)::float, 1),
                                       p.run_at, p.id) AS nth_of_queue
    FROM per_tenant AS p
    JOIN queues AS q ON q.name = p.queue
    WHERE p.cap IS NULL OR p.nt <= p.cap - p.running
),
-- rates{
rate_jobs AS (
    -- Each candidate's buckets, the candidates of each bucket in the order "picked" serves them:
    -- a bucket with n tokens admits its first n (a candidate another bucket turns away still
    -- counts here, so a claim may admit fewer, never more).
    SELECT r.id, jk.key,
           row_number() OVER (PARTITION BY jk.key
                              ORDER BY CASE WHEN %(strict)s THEN r.pos ELSE 0 END,
                                       CASE WHEN %(strict)s THEN r.nth_of_queue
                                            ELSE r.start + r.nth_of_queue / r.weight END,
                                       r.pos, r.id) AS nth
    FROM ranked AS r
    JOIN jobqueue_job AS j ON j.id = r.id
    CROSS JOIN LATERAL (SELECT k.key FROM rate_keys AS k WHERE k.type = j.type
                        UNION ALL
                        SELECT l.key FROM rate_limits AS l WHERE l.key = 'tenant:' || j.tenant_id)
               AS jk
    WHERE r.nth_of_queue <= %(max_jobs)s
),
rate_buckets AS MATERIALIZED (
    -- The buckets the candidates draw on, locked in key order and read as committed now (not
    -- as of the snapshot): what is spent. A claim waits here for a bucket another holds.
    SELECT b.key,
           least(r.burst, b.tokens + r.rate * greatest(0, extract(epoch FROM
                 coalesce(%(now)s::timestamptz, now()) - b.refreshed_at))) AS tokens
    FROM jobqueue_rate_limit AS b
    JOIN rate_limits AS r ON r.key = b.key
    WHERE b.key IN (SELECT x.key FROM rate_jobs AS x)
    ORDER BY b.key
    FOR UPDATE OF b
),
-- }rates
picked AS (
    SELECT r.id, r.pos, r.nth_of_queue, r.start + r.nth_of_queue / r.weight AS tag
    FROM ranked AS r
    -- rates{
    WHERE r.nth_of_queue <= %(max_jobs)s
      AND NOT EXISTS (SELECT 1 FROM rate_jobs AS x LEFT JOIN rate_buckets AS b ON b.key = x.key
                      WHERE x.id = r.id AND (b.tokens IS NULL OR x.nth > floor(b.tokens)))
    -- }rates
    ORDER BY CASE WHEN %(strict)s THEN r.pos ELSE 0 END,
             CASE WHEN %(strict)s THEN r.nth_of_queue ELSE r.start + r.nth_of_queue / r.weight END,
             r.pos
    LIMIT %(max_jobs)s
)
-- rates{
, rate_spent AS (
    UPDATE jobqueue_rate_limit AS b
    -- Never back in time: a claim whose transaction began before the last spend's refilled
    -- nothing (elapsed < 0 counts as 0) and must not make the next refill count that time twice.
    SET tokens = rb.tokens - s.taken,
        refreshed_at = greatest(b.refreshed_at, coalesce(%(now)s::timestamptz, now()))
    FROM (SELECT x.key, count(*) AS taken
          FROM rate_jobs AS x JOIN picked AS p ON p.id = x.id GROUP BY x.key) AS s
    JOIN rate_buckets AS rb ON rb.key = s.key
    WHERE b.key = s.key
)
-- }rates
UPDATE jobqueue_job AS j
SET state = 'leased',
    attempts = j.attempts + 1,
    lease_token = gen_random_uuid(),
    lease_until = coalesce(%(now)s::timestamptz, now()) + make_interval(secs => %(lease_s)s::float8),
    leased_by = %(worker_id)s,
    started_at = coalesce(%(now)s::timestamptz, now())
FROM picked
WHERE j.id = picked.id
RETURNING j.id, j.type, j.payload, j.attempts, j.max_attempts, j.timeout_s, j.lease_token,
          j.lease_until, j.queue, j.priority, j.tenant_id, picked.pos, picked.nth_of_queue, picked.tag,
          j.suspect, j.concurrency_key, j.batch_id, j.trace
