-- release_deferred: a closed breaker's held-back jobs are ready now instead of at the end of the
-- cool-down they were pushed to. Only jobs whose newest history entry is the deferral: a job
-- that since failed on its own keeps its backoff. Rare (an operator's close): scans the
-- scheduled rows of the given types.
UPDATE jobqueue_job
SET state = 'ready', run_at = coalesce(%(now)s::timestamptz, now())
WHERE state = 'scheduled'
  AND type = ANY(%(types)s::text[])
  AND errors -> -1 ->> 'kind' = 'deferred'
RETURNING id
