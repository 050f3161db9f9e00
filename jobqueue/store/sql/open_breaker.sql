-- open_breaker: open a dependency's breaker for a given time (a handler's RetryAfter, or an operator);
-- an open breaker's cool-down is only ever extended. Unique index on name; one upsert.
INSERT INTO jobqueue_dependencybreaker AS br
    (name, state, window_started_at, failures, successes, open_until, cooldown_s,
     opened_count, last_opened_at, reason, updated_at)
VALUES (%(name)s, 'open', coalesce(%(now)s::timestamptz, now()), 0, 0,
        coalesce(%(now)s::timestamptz, now()) + make_interval(secs => %(seconds)s::float8),
        %(cooldown_s)s, 1, coalesce(%(now)s::timestamptz, now()), %(reason)s,
        coalesce(%(now)s::timestamptz, now()))
ON CONFLICT (name) DO UPDATE
SET state = 'open',
    open_until = CASE WHEN br.state = 'open' THEN greatest(br.open_until, EXCLUDED.open_until)
                      ELSE EXCLUDED.open_until END,
    failures = 0, successes = 0, window_started_at = EXCLUDED.window_started_at,
    -- A probe in flight no longer decides anything: its outcome will not match probe_job_id.
    probe_job_id = NULL, probe_until = NULL,
    cooldown_s = greatest(br.cooldown_s, EXCLUDED.cooldown_s),
    opened_count = br.opened_count + CASE WHEN br.state = 'open' THEN 0 ELSE 1 END,
    last_opened_at = CASE WHEN br.state = 'open' THEN br.last_opened_at
                          ELSE EXCLUDED.last_opened_at END,
    reason = EXCLUDED.reason,
    updated_at = EXCLUDED.updated_at
RETURNING open_until
