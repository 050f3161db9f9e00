-- breaker_states: the breakers of the given dependencies and the database clock, for the claim gate.
-- Looks rows up by the unique index on name; a dependency without a row is closed.
SELECT name, state, open_until, probe_until, cooldown_s, coalesce(%(now)s::timestamptz, now()) AS now
FROM jobqueue_dependencybreaker
WHERE name = ANY(%(names)s::text[])
