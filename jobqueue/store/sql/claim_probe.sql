-- claim_probe: make this job the one probe of an open breaker whose cool-down is over (-> half_open),
-- or take over a probe that lapsed unanswered. One compare-and-set on the row: two workers never both win.
UPDATE jobqueue_dependencybreaker
SET state = 'half_open',
    probe_job_id = %(job_id)s,
    probe_until = coalesce(%(now)s::timestamptz, now()) + make_interval(secs => %(probe_s)s::float8),
    updated_at = coalesce(%(now)s::timestamptz, now())
WHERE name = %(name)s
  AND ((state = 'open' AND open_until <= coalesce(%(now)s::timestamptz, now()))
       OR (state = 'half_open' AND probe_until <= coalesce(%(now)s::timestamptz, now())))
RETURNING probe_until
