-- claim: lease up to max_jobs due jobs of the given queues, in two levels (docs/decisions.md,
-- "The claim in two levels"; docs/fairness.md).
--
-- A lane is one (queue, tenant) pair: what a tenant's fair share and cap are counted on.
--
-- Level one picks lanes, reading no job but each lane's first index entry:
--   "tenants" walks jobqueue_job_claim (queue, tenant_id, priority DESC, run_at, id) over
--     claimable rows as a loose index scan: one probe per lane with work, giving its tenant and
--     its top priority; at most %(lane_window)s lanes a queue, from where this server
--     session's last claim of the queue stopped ("window_moved"), so a claim's cost does not
--     grow with the number of tenants;
--   a lane whose tenant is at its cap (leased jobs, all queues and workers) or whose tenant's
--     rate bucket is drained, or whose queue is paused, is left out here: it never takes a
--     place another lane could use;
--   each lane's next jobs get virtual finish tags base + k / weight (k = 1, 2, ...; weight:
--     JOBQUEUE["TENANT_WEIGHTS"], default 1), where base is the lane's virtual time
--     (jobqueue_lane.vtime: the tag of the last job it was served). A lane is current when it
--     was served within 2 s of its queue's latest service; the current lanes' lowest time is the
--     queue's virtual now. A lane back from idle (not current) is raised to one job behind that
--     now, and a new lane (no row) enters there: it is served at once but banks no credit for
--     the time it had no work, and its row is written then (else it would re-enter behind a
--     moving now at every claim, and a heavier lane would keep it out); a current
--     lane keeps its own time (claims running at once all serve the lowest lanes from one
--     snapshot and overshoot them: the lanes left behind must keep that credit, or the shares
--     drift with the number of workers), bounded to 1,000 jobs behind the lane furthest ahead
--     (a time set wrong by hand). This is start-time fair queueing (Goyal, Vin and Cheng,
--     SIGCOMM 1996): over many claims, backlogged tenants are served in proportion to their
--     weights whatever the claim size or the number of workers;
--   the max_jobs lowest tags of each queue (higher top priority first) are the lanes' allotments
--     ("allotted"; none past its tenant's room; twice the claim, the rest spare). Only lanes that can win a place are tagged: the
--     max_jobs first of each queue by their first tag ("fronts").
-- Level two takes each allotted lane's head jobs, as many as its allotment, by the claim index
-- (one probe per lane), read past what may not run now, and locked with SKIP LOCKED:
--   a job whose type is paused;
--   a job with an ordering_key while an earlier live job of that key exists or any job of that
--     key is leased;
--   a job whose concurrency key has no room (its limit: the setting's override from the
--     %(limits)s object, else the job's; less its leased jobs, all queues and workers); one
--     claim takes no more than the key's room ("cut": nk);
--   rates{
--   a job under a drained token bucket (its type's, its dependency's); and the jobs of
--     rate-limited types come from a probe of their own beside the lane's other jobs, so a
--     limited backlog at the lane's head never holds up the types behind it ("heads" second
--     branch; "rate_cut" keeps no more of a bucket's jobs than it has tokens by the snapshot);
--   }rates
-- A lane whose head gave fewer than its allotment leaves the rest of the claim unfilled; the
-- caller claims again when a claim came back short (store/postgres/jobs.py).
--
-- Across queues: by weighted-fair tag start[q] + nth / weight[q] (nth = the job's place in its
-- queue), or, with strict, by the queue's position in the list (limits/fairness.py).
--
-- Each lane served moves its virtual time past what it got ("lanes_served"): the lane rows are
-- locked in key order, after the rate buckets, so two claims wait on each other only briefly and
-- never deadlock; job rows are only ever taken with SKIP LOCKED. A row another claim leased
-- since this statement's snapshot fails the re-checked state condition and is skipped. Rows
-- locked but not picked are unlocked at commit.
--
-- Rate limits (docs/decisions.md "Rate limits in the claim"): the buckets are refilled to now
-- and spent in this statement ("rate_*"), so workers on every host share them by the database
-- clock. Drained buckets are read from the snapshot ("rate_out"); the buckets of the candidates
-- that can be picked are locked in key order and read as committed ("rate_buckets"): no token is
-- spent twice. The store creates missing buckets after a short claim (ensure_rate_buckets.sql);
-- one still missing counts as empty. The lines between "rates{" and "}rates" are sent only when
-- some limit is declared (store/sqltext.py).
--
-- Leased counts are read only where a cap needs them: fairness is by virtual time, not by what
-- is running, so an uncapped claim counts nothing.
WITH RECURSIVE
queues AS (
    SELECT q.name, q.weight, q.start, q.pos,
           coalesce(nullif(current_setting('jobqueue.lane_window', true), '')::jsonb ->> q.name,
                    '') AS window_at
    FROM unnest(%(queues)s::text[], %(weights)s::float8[], %(start)s::float8[])
         WITH ORDINALITY AS q(name, weight, start, pos)
    WHERE NOT EXISTS (SELECT 1 FROM jobqueue_pause AS p WHERE p.kind = 'queue' AND p.name = q.name)
),
tenants AS (
    -- The lanes with work, as a loose scan of the claim index from where this server session's
    -- last claim of the queue stopped ("window_at"), at most %(lane_window)s of them, wrapping
    -- round to the first lane: a queue of up to that many lanes is seen whole by every claim,
    -- one of more is seen a window at a time, each claim moving on (docs/decisions.md, "The
    -- lane window"). wrapped: past the last lane, back from the first (up to the start).
    SELECT q.name AS queue, q.window_at, h.tenant_id, h.priority, h.wrapped, 1 AS n
    FROM queues AS q
    CROSS JOIN LATERAL (
        (SELECT j.tenant_id, j.priority, false AS wrapped FROM jobqueue_job AS j
         WHERE j.queue = q.name AND j.state IN ('ready', 'scheduled') AND j.tenant_id >= q.window_at
         ORDER BY j.tenant_id, j.priority DESC LIMIT 1)
        UNION ALL
        (SELECT j.tenant_id, j.priority, true FROM jobqueue_job AS j
         WHERE j.queue = q.name AND j.state IN ('ready', 'scheduled') AND j.tenant_id < q.window_at
         ORDER BY j.tenant_id, j.priority DESC LIMIT 1)
        LIMIT 1
    ) AS h
    UNION ALL
    SELECT t.queue, t.window_at, h.tenant_id, h.priority, h.wrapped, t.n + 1
    FROM tenants AS t
    CROSS JOIN LATERAL (
        (SELECT j.tenant_id, j.priority, false AS wrapped FROM jobqueue_job AS j
         WHERE NOT t.wrapped AND j.queue = t.queue AND j.state IN ('ready', 'scheduled')
           AND j.tenant_id > t.tenant_id
         ORDER BY j.tenant_id, j.priority DESC LIMIT 1)
        UNION ALL
        (SELECT j.tenant_id, j.priority, true FROM jobqueue_job AS j
         WHERE NOT t.wrapped AND j.queue = t.queue AND j.state IN ('ready', 'scheduled')
           AND j.tenant_id < t.window_at
         ORDER BY j.tenant_id, j.priority DESC LIMIT 1)
        UNION ALL
        (SELECT j.tenant_id, j.priority, true FROM jobqueue_job AS j
         WHERE t.wrapped AND j.queue = t.queue AND j.state IN ('ready', 'scheduled')
           AND j.tenant_id > t.tenant_id AND j.tenant_id < t.window_at
         ORDER BY j.tenant_id, j.priority DESC LIMIT 1)
        LIMIT 1
    ) AS h
    WHERE t.n < %(lane_window)s
),
window_moved AS (
    -- Where this session's next claim of each queue starts: its window's last lane when the
    -- window filled (that lane is seen again), else nowhere (the scan saw every lane). A
    -- session setting, so each server session moves through the lanes on its own; behind a
    -- transaction pooler another client's claim starts there, which is as good a start.
    SELECT set_config('jobqueue.lane_window',
                      (coalesce(nullif(current_setting('jobqueue.lane_window', true), '')::jsonb,
                                '{}'::jsonb)
                       - %(queues)s::text[]
                       || coalesce(jsonb_object_agg(w.queue, w.tenant_id)
                                       FILTER (WHERE w.n >= %(lane_window)s), '{}'::jsonb))::text,
                      false) AS setting
    FROM (SELECT DISTINCT ON (t.queue) t.queue, t.tenant_id, t.n
          FROM tenants AS t ORDER BY t.queue, t.n DESC) AS w
),
load AS MATERIALIZED (
    -- Each tenant's cap (an override; NULL exempts the tenant; the site's own jobs, tenant '',
    -- are not capped by the default) and, only where there is a cap, its leased jobs.
    SELECT c.tenant_id, c.cap,
           CASE WHEN c.cap IS NOT NULL
                THEN (SELECT count(*) FROM jobqueue_job AS l
                      WHERE l.state = 'leased' AND l.tenant_id = c.tenant_id)
                ELSE 0 END AS running
    FROM (SELECT d.tenant_id,
                 CASE WHEN o.tenant_id IS NOT NULL THEN o.cap
                      WHEN d.tenant_id = '' THEN NULL
                      ELSE %(default_cap)s::int END AS cap
          FROM (SELECT DISTINCT tenant_id FROM tenants) AS d
          LEFT JOIN unnest(%(cap_tenants)s::text[], %(cap_values)s::int[]) AS o(tenant_id, cap)
              ON o.tenant_id = d.tenant_id) AS c
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
rate_est AS MATERIALIZED (
    -- Each bucket's tokens refilled to now, as of this statement's snapshot, unlocked (0: a
    -- bucket not yet created). An estimate for choosing; what is spent is read in rate_buckets.
    SELECT r.key, coalesce(least(r.burst, b.tokens + r.rate * greatest(0, extract(epoch FROM
           coalesce(%(now)s::timestamptz, now()) - b.refreshed_at))), 0) AS tokens,
           b.key IS NULL AS missing
    FROM rate_limits AS r
    LEFT JOIN jobqueue_rate_limit AS b ON b.key = r.key
),
rate_out AS MATERIALIZED (
    -- The buckets that turn jobs away (less than one token; a burst is at least 1), each with
    -- the types it limits (none: a tenant's).
    SELECT e.key, k.type
    FROM rate_est AS e
    LEFT JOIN rate_keys AS k ON k.key = e.key
    WHERE e.tokens < 1
),
-- }rates
lanes AS MATERIALIZED (
    SELECT t.queue, t.tenant_id, t.priority, l.cap, l.running, v.vtime, v.served_at,
           coalesce((%(tenant_weights)s::jsonb->>t.tenant_id)::float8, 1) AS weight
    FROM tenants AS t
    JOIN load AS l ON l.tenant_id = t.tenant_id
    LEFT JOIN jobqueue_lane AS v ON v.queue = t.queue AND v.tenant_id = t.tenant_id
    WHERE (l.cap IS NULL OR l.cap > l.running)
    -- rates{
      AND NOT EXISTS (SELECT 1 FROM rate_out AS o WHERE o.key = 'tenant:' || t.tenant_id)
    -- }rates
),
fronts AS (
    SELECT f.*
    FROM (SELECT b.*, row_number() OVER (PARTITION BY b.queue
                                         ORDER BY b.priority DESC, b.base + 1 / b.weight,
                                                  b.tenant_id) AS nf
          FROM (SELECT c.*,
                       CASE WHEN c.vtime IS NULL THEN coalesce(c.vnow - 1, c.front - 1, 0)
                            WHEN c.current THEN greatest(c.vtime, c.front - 1000)
                            ELSE greatest(c.vtime, c.vnow - 1, c.front - 1000) END AS base
                FROM (SELECT d.*,
                             min(d.vtime) FILTER (WHERE d.current)
                                 OVER (PARTITION BY d.queue) AS vnow
                      FROM (SELECT a.*, max(a.vtime) OVER (PARTITION BY a.queue) AS front,
                                   a.served_at >= max(a.served_at) OVER (PARTITION BY a.queue)
                                                  - interval '2 seconds' AS current
                            FROM lanes AS a) AS d) AS c) AS b) AS f
    WHERE f.nf <= 2 * %(max_jobs)s
),
allotted AS (
    -- (A lane's allotment is held to its tenant's room; across a tenant's lanes the cap is
    -- applied to the jobs the heads gave, in "cut": the virtual times of two queues are not
    -- comparable, and a lane with nothing to give must not take its tenant's room.)
    SELECT s.queue, s.tenant_id, s.base, s.vtime, s.weight, s.cap, s.running, count(*) AS n
    FROM (SELECT t.*, row_number() OVER (PARTITION BY t.queue
                                         ORDER BY t.priority DESC, t.tag, t.tenant_id) AS nq
          FROM (SELECT f.queue, f.tenant_id, f.priority, f.base, f.vtime, f.weight, f.cap,
                       f.running, g.k, f.base + g.k / f.weight AS tag
                FROM (SELECT f.*, count(*) OVER (PARTITION BY f.queue) AS fronts,
                             first_value(f.priority) OVER last AS last_priority,
                             first_value(f.base + 1 / f.weight) OVER last AS last_tag
                      FROM fronts AS f
                      WINDOW last AS (PARTITION BY f.queue ORDER BY f.nf DESC)) AS f
                -- Only the tags that can be among the queue's places: when the fronts fill
                -- them, none past the last front's first tag, since the fronts' first tags
                -- come before it (one more for rounding). Without the bound every lane would
                -- get max_jobs tags: 2 x max_jobs squared rows to sort, most of a claim's time
                -- at 100 tenants.
                CROSS JOIN generate_series(1, CASE
                    WHEN f.fronts < 2 * %(max_jobs)s OR f.priority > f.last_priority
                    THEN %(max_jobs)s
                    ELSE least(%(max_jobs)s,
                               greatest(1, floor((f.last_tag - f.base) * f.weight)::int + 1))
                    END) AS g(k)) AS t
          WHERE t.cap IS NULL OR t.k <= t.cap - t.running) AS s
    -- Twice the claim's size: a lane may give less than its allotment (its head jobs leased
    -- by a concurrent claim, held by their keys, not yet due); the spare places fill from the
    -- next lanes in tag order, and what is left over is unlocked at commit.
    WHERE s.nq <= 2 * %(max_jobs)s
    GROUP BY s.queue, s.tenant_id, s.base, s.vtime, s.weight, s.cap, s.running
),
heads AS (
    SELECT h.id, h.type, h.priority, h.run_at, h.room, a.queue, a.tenant_id, a.base, a.weight,
           a.n, a.cap, a.running,
           -- One claim takes at most a key's room of its jobs, across queues and tenants.
           row_number() OVER (PARTITION BY h.ck ORDER BY h.priority DESC, h.run_at, h.id) AS nk
    FROM allotted AS a
    CROSS JOIN LATERAL (
        -- (Each branch a subquery of its own: FOR UPDATE is not allowed in a UNION's member.)
        SELECT * FROM (SELECT j.id, j.type, j.priority, j.run_at, j.concurrency_key AS ck, k.room
        FROM jobqueue_job AS j
        -- The key's room: its limit less its leased jobs. NULL: no key (or no limit).
        CROSS JOIN LATERAL (
            SELECT CASE WHEN j.concurrency_key IS NOT NULL THEN
                coalesce((%(limits)s::jsonb->>j.concurrency_key)::int, j.concurrency_limit)
                - (SELECT count(*) FROM jobqueue_job AS r
                   WHERE r.state = 'leased' AND r.concurrency_key = j.concurrency_key) END AS room
        ) AS k
        WHERE j.queue = a.queue
          AND j.tenant_id = a.tenant_id
          AND j.state IN ('ready', 'scheduled')
          AND j.run_at <= coalesce(%(now)s::timestamptz, now())
          AND NOT EXISTS (SELECT 1 FROM jobqueue_pause AS p
                          WHERE p.kind = 'type' AND p.name = j.type)
          AND (j.ordering_key IS NULL OR NOT EXISTS (
                SELECT 1 FROM jobqueue_job AS o
                WHERE o.ordering_key = j.ordering_key
                  AND o.state IN ('leased', 'ready', 'scheduled')
                  AND (o.id < j.id OR o.state = 'leased')))
          -- (IS NULL first: the planner then estimates nearly every row passes, as it does.)
          AND (j.concurrency_key IS NULL OR k.room > 0)
          -- rates{
          AND j.type <> ALL(%(rl_types)s::text[])
          -- }rates
        ORDER BY j.priority DESC, j.run_at, j.id
        -- An expression LIMIT: the lane's allotment. The statement runs with JIT off
        -- (store/postgres/jobs.py), since the planner estimates such a LIMIT at a tenth of the
        -- rows it could read.
        LIMIT a.n
        FOR UPDATE OF j SKIP LOCKED) AS unlimited
        -- rates{
        UNION ALL
        -- The rate-limited types' jobs, one probe per type by jobqueue_job_claim_type (a probe
        -- by the lane alone read the lane's whole backlog in every claim when none of its jobs
        -- was of a limited type); a type whose bucket is drained is not probed at all.
        SELECT * FROM (SELECT l.* FROM (SELECT DISTINCT u.type
                                        FROM unnest(%(rl_types)s::text[]) AS u(type)) AS t
        CROSS JOIN LATERAL (
            SELECT j.id, j.type, j.priority, j.run_at, j.concurrency_key AS ck, k.room
            FROM jobqueue_job AS j
            CROSS JOIN LATERAL (
                SELECT CASE WHEN j.concurrency_key IS NOT NULL THEN
                    coalesce((%(limits)s::jsonb->>j.concurrency_key)::int, j.concurrency_limit)
                    - (SELECT count(*) FROM jobqueue_job AS r
                       WHERE r.state = 'leased' AND r.concurrency_key = j.concurrency_key) END
                    AS room
            ) AS k
            WHERE j.queue = a.queue
              AND j.tenant_id = a.tenant_id
              AND j.type = t.type
              -- (The claimable states as a range, as that index's predicate: the lane's index,
              -- whose predicate is the list, can then not serve this probe, which a plan made
              -- for any type would otherwise choose when one type fills the table.)
              AND j.state >= 'ready' AND j.state <= 'scheduled'
              AND j.run_at <= coalesce(%(now)s::timestamptz, now())
              AND NOT EXISTS (SELECT 1 FROM jobqueue_pause AS p
                              WHERE p.kind = 'type' AND p.name = j.type)
              AND (j.ordering_key IS NULL OR NOT EXISTS (
                    SELECT 1 FROM jobqueue_job AS o
                    WHERE o.ordering_key = j.ordering_key
                      AND o.state IN ('leased', 'ready', 'scheduled')
                      AND (o.id < j.id OR o.state = 'leased')))
              AND (j.concurrency_key IS NULL OR k.room > 0)
            ORDER BY j.priority DESC, j.run_at, j.id
            LIMIT a.n
            FOR UPDATE OF j SKIP LOCKED) AS l
        WHERE NOT EXISTS (SELECT 1 FROM rate_out AS o WHERE o.type = t.type)
        ORDER BY l.priority DESC, l.run_at, l.id
        LIMIT a.n) AS limited
        -- }rates
    ) AS h
),
-- rates{
rate_cut AS (
    -- The jobs of each type bucket past its tokens (by the snapshot): left out before the
    -- lanes' allotments are cut, so they never take the place of a job that can run.
    SELECT x.id
    FROM (SELECT h.id, k.key,
                 row_number() OVER (PARTITION BY k.key
                                    ORDER BY h.priority DESC, h.run_at, h.id) AS nth
          FROM heads AS h JOIN rate_keys AS k ON k.type = h.type) AS x
    JOIN rate_est AS e ON e.key = x.key
    WHERE x.nth > floor(e.tokens)
),
-- }rates
cut AS MATERIALIZED (
    -- Each lane's jobs up to its allotment, tagged; then no tenant past its cap (leased jobs
    -- and the ones this claim takes, all queues).
    SELECT d.*
    FROM (SELECT c.*, row_number() OVER (PARTITION BY c.tenant_id
                                         ORDER BY c.priority DESC, c.tag, c.queue, c.run_at,
                                                  c.id) AS nt
          FROM (SELECT l.*, l.base + l.nl / l.weight AS tag
                FROM (SELECT h.*,
                             row_number() OVER (PARTITION BY h.queue, h.tenant_id
                                                ORDER BY h.priority DESC, h.run_at, h.id) AS nl
                      FROM heads AS h
                      WHERE (h.room IS NULL OR h.nk <= h.room)
                      -- rates{
                        AND h.id NOT IN (SELECT x.id FROM rate_cut AS x)
                      -- }rates
                     ) AS l
                WHERE l.nl <= l.n) AS c) AS d
    WHERE d.cap IS NULL OR d.nt <= d.cap - d.running
),
ranked AS (
    SELECT c.id, c.type, c.queue, c.tenant_id, c.tag, c.base, c.weight, q.pos,
           q.weight AS qweight, q.start,
           row_number() OVER (PARTITION BY c.queue
                              ORDER BY c.priority DESC, c.tag, c.tenant_id, c.run_at, c.id)
               AS nth_of_queue
    FROM cut AS c
    JOIN queues AS q ON q.name = c.queue
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
                                            ELSE r.start + r.nth_of_queue / r.qweight END,
                                       r.pos, r.id) AS nth
    -- (The type and tenant come with the candidate: a join back to jobqueue_job here was
    -- planned, once per session, on the table's size then, and ran as a scan of the whole
    -- table in every claim of a session begun on an empty one.)
    FROM ranked AS r
    CROSS JOIN LATERAL (SELECT k.key FROM rate_keys AS k WHERE k.type = r.type
                        UNION ALL
                        SELECT l.key FROM rate_limits AS l WHERE l.key = 'tenant:' || r.tenant_id)
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
    SELECT r.id, r.queue, r.tenant_id, r.base, r.weight, r.pos, r.nth_of_queue,
           r.start + r.nth_of_queue / r.qweight AS tag
    FROM ranked AS r
    -- rates{
    WHERE r.nth_of_queue <= %(max_jobs)s
      AND NOT EXISTS (SELECT 1 FROM rate_jobs AS x LEFT JOIN rate_buckets AS b ON b.key = x.key
                      WHERE x.id = r.id AND (b.tokens IS NULL OR x.nth > floor(b.tokens)))
    -- }rates
    ORDER BY CASE WHEN %(strict)s THEN r.pos ELSE 0 END,
             CASE WHEN %(strict)s THEN r.nth_of_queue ELSE r.start + r.nth_of_queue / r.qweight END,
             r.pos
    LIMIT %(max_jobs)s
),
-- rates{
rate_spent AS (
    UPDATE jobqueue_rate_limit AS b
    -- Never back in time: a claim whose transaction began before the last spend's refilled
    -- nothing (elapsed < 0 counts as 0) and must not make the next refill count that time twice.
    SET tokens = rb.tokens - s.taken,
        refreshed_at = greatest(b.refreshed_at, coalesce(%(now)s::timestamptz, now()))
    FROM (SELECT x.key, count(*) AS taken
          FROM rate_jobs AS x JOIN picked AS p ON p.id = x.id GROUP BY x.key) AS s
    JOIN rate_buckets AS rb ON rb.key = s.key
    WHERE b.key = s.key
),
-- }rates
served AS (
    -- What each lane got, from its base: 1 / weight a job. A lane that was allotted places but
    -- had no job to give (its heads held by their keys, not yet due, or leased meanwhile) is
    -- charged one job, so it cannot keep the first places of every claim while it gives
    -- nothing; once it has work it re-enters at the front (base) like any other.
    -- A lane that entered here (new, or raised from idle) and gave jobs that were not picked
    -- is written at its base: it keeps its place from now on.
    SELECT a.queue, a.tenant_id, a.base,
           CASE WHEN p.n > 0 THEN p.n / a.weight
                WHEN NOT EXISTS (SELECT 1 FROM cut AS c
                                 WHERE c.queue = a.queue AND c.tenant_id = a.tenant_id)
                THEN 1 / a.weight
                ELSE 0 END AS got
    FROM allotted AS a
    LEFT JOIN (SELECT x.queue, x.tenant_id, count(*) AS n FROM picked AS x
               GROUP BY x.queue, x.tenant_id) AS p
        ON p.queue = a.queue AND p.tenant_id = a.tenant_id
    WHERE p.n > 0
       OR NOT EXISTS (SELECT 1 FROM cut AS c WHERE c.queue = a.queue AND c.tenant_id = a.tenant_id)
       OR a.vtime IS NULL OR a.base > a.vtime
),
lanes_served AS (
    -- The lane's new virtual time: past what it got, from its base or, if another claim moved
    -- it further since this statement's snapshot, from there (so two claims add up).
    INSERT INTO jobqueue_lane AS l (queue, tenant_id, vtime, served_at)
    SELECT s.queue, s.tenant_id, s.base + s.got, coalesce(%(now)s::timestamptz, now())
    FROM served AS s
    ORDER BY s.queue, s.tenant_id
    ON CONFLICT (queue, tenant_id) DO UPDATE
    SET vtime = greatest(l.vtime, (SELECT s.base FROM served AS s
                                   WHERE s.queue = l.queue AND s.tenant_id = l.tenant_id))
                + (SELECT s.got FROM served AS s
                   WHERE s.queue = l.queue AND s.tenant_id = l.tenant_id),
        served_at = excluded.served_at
),
claimed AS (
    UPDATE jobqueue_job AS j
    SET state = 'leased',
        attempts = j.attempts + 1,
        lease_token = gen_random_uuid(),
        lease_until = coalesce(%(now)s::timestamptz, now()) + make_interval(secs => %(lease_s)s::float8),
        leased_by = %(worker_id)s,
        started_at = coalesce(%(now)s::timestamptz, now())
    FROM picked
    WHERE j.id = picked.id
      -- (A condition on no row: evaluated once before the join, so the window moves on whether
      -- or not this claim takes a job.)
      AND (SELECT count(*) FROM window_moved) >= 0
    RETURNING j.id, j.type, j.payload, j.attempts, j.max_attempts, j.timeout_s, j.lease_token,
              j.lease_until, j.queue, j.priority, j.tenant_id, picked.pos, picked.nth_of_queue, picked.tag,
              j.suspect, j.concurrency_key, j.batch_id, j.trace
)
SELECT * FROM claimed
-- rates{
UNION ALL
-- A row of no job (id NULL) when a bucket kept out a job this claim could otherwise have taken
-- (more of its jobs than tokens, by the snapshot or as committed) or a bucket it may draw on is
-- not there yet: only then may a second claim fill the places left (store/shared.py,
-- claim_again). A claim short for want of work says so by not sending it.
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       NULL, NULL, NULL
WHERE EXISTS (SELECT 1 FROM rate_cut)
   OR EXISTS (SELECT 1 FROM rate_est AS e WHERE e.missing)
   OR EXISTS (SELECT 1 FROM ranked AS r
              WHERE r.nth_of_queue <= %(max_jobs)s
                AND NOT EXISTS (SELECT 1 FROM picked AS p WHERE p.id = r.id))
-- }rates
