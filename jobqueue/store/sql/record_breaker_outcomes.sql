-- record_breaker_outcomes: count one batch of outcomes per dependency and move each breaker in the same statement:
-- closed -> open past the thresholds; half_open -> closed (probe ok) or open with the cool-down doubled (probe failed).
-- Rows are locked FOR UPDATE in the CTE, which therefore sees the latest committed counts (no lost updates).
WITH b AS (
    SELECT *
    FROM unnest(%(names)s::text[], %(successes)s::int[], %(failures)s::int[],
                %(probe_ids)s::bigint[], %(probe_results)s::text[])
        AS b(name, s, f, probe_id, probe_result)
),
cur AS (
    SELECT br.id, br.state, br.cooldown_s, br.open_until, b.probe_result, t.now,
           (br.state = 'half_open' AND b.probe_id IS NOT NULL
            AND b.probe_id = br.probe_job_id) AS is_probe,
           -- A window that has ended starts over with this batch.
           (br.window_started_at + make_interval(secs => %(window_s)s::float8) <= t.now) AS rolled,
           br.window_started_at, br.failures, br.successes, b.s, b.f
    FROM jobqueue_dependencybreaker AS br
    JOIN b ON b.name = br.name
    CROSS JOIN (SELECT coalesce(%(now)s::timestamptz, now()) AS now) AS t
    ORDER BY br.id
    FOR UPDATE OF br
),
counted AS (
    SELECT cur.*,
           CASE WHEN rolled THEN f ELSE failures + f END AS wf,
           CASE WHEN rolled THEN s ELSE successes + s END AS ws,
           CASE WHEN rolled THEN now ELSE window_started_at END AS wstart
    FROM cur
),
next AS (
    SELECT counted.*,
           CASE WHEN is_probe AND probe_result = 'ok' THEN 'closed'
                WHEN is_probe AND probe_result = 'failed' THEN 'reopened'
                -- Neither (a permanent error): the probe proved nothing; the next claim probes.
                WHEN is_probe THEN 'released'
                WHEN state = 'closed' AND wf >= %(threshold)s
                     AND wf >= %(ratio)s::float8 * (wf + ws) THEN 'tripped'
                ELSE 'same' END AS move
    FROM counted
)
UPDATE jobqueue_dependencybreaker AS br
SET state = CASE n.move WHEN 'closed' THEN 'closed' WHEN 'same' THEN n.state ELSE 'open' END,
    failures = CASE WHEN n.move = 'same' THEN n.wf ELSE 0 END,
    successes = CASE WHEN n.move = 'same' THEN n.ws ELSE 0 END,
    window_started_at = CASE WHEN n.move = 'same' THEN n.wstart ELSE n.now END,
    cooldown_s = CASE n.move
        WHEN 'reopened' THEN least(%(max_cooldown_s)s::float8,
                                   greatest(n.cooldown_s, %(cooldown_s)s::float8) * 2)
        WHEN 'tripped' THEN %(cooldown_s)s::float8
        WHEN 'closed' THEN %(cooldown_s)s::float8
        ELSE n.cooldown_s END,
    open_until = CASE n.move
        WHEN 'reopened' THEN n.now + make_interval(secs => least(
            %(max_cooldown_s)s::float8, greatest(n.cooldown_s, %(cooldown_s)s::float8) * 2))
        WHEN 'tripped' THEN n.now + make_interval(secs => %(cooldown_s)s::float8)
        WHEN 'released' THEN n.now
        WHEN 'closed' THEN NULL
        ELSE n.open_until END,
    probe_job_id = CASE WHEN n.is_probe THEN NULL ELSE br.probe_job_id END,
    probe_until = CASE WHEN n.is_probe THEN NULL ELSE br.probe_until END,
    opened_count = br.opened_count + CASE WHEN n.move IN ('tripped', 'reopened') THEN 1 ELSE 0 END,
    last_opened_at = CASE WHEN n.move IN ('tripped', 'reopened') THEN n.now ELSE br.last_opened_at END,
    reason = CASE n.move
        WHEN 'tripped' THEN n.wf || ' failures of ' || (n.wf + n.ws) || ' outcomes in the window'
        WHEN 'reopened' THEN 'probe job ' || br.probe_job_id || ' failed'
        WHEN 'closed' THEN 'probe job ' || br.probe_job_id || ' succeeded'
        ELSE br.reason END,
    updated_at = n.now
FROM next AS n
WHERE br.id = n.id
RETURNING br.name, br.state
