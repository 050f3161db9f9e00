-- close_breaker: close a dependency's breaker now (an operator), forgetting its window and cool-down.
-- Unique index on name; a probe in flight no longer decides anything.
UPDATE jobqueue_dependencybreaker
SET state = 'closed', failures = 0, successes = 0,
    window_started_at = coalesce(%(now)s::timestamptz, now()),
    open_until = NULL, probe_job_id = NULL, probe_until = NULL,
    cooldown_s = %(cooldown_s)s, reason = %(reason)s,
    updated_at = coalesce(%(now)s::timestamptz, now())
WHERE name = %(name)s
RETURNING state
