-- ensure_breakers: create a closed breaker for each named dependency that has none yet.
-- Unique index on name; an existing row is left alone.
INSERT INTO jobqueue_dependencybreaker
    (name, state, window_started_at, failures, successes, cooldown_s, opened_count, reason, updated_at)
SELECT n.name, 'closed', coalesce(%(now)s::timestamptz, now()), 0, 0, %(cooldown_s)s, 0, '',
       coalesce(%(now)s::timestamptz, now())
FROM unnest(%(names)s::text[]) AS n(name)
ORDER BY n.name
ON CONFLICT (name) DO NOTHING
