-- prune: delete up to %(limit)s jobs of the given finished states that finished before now() - older_than.
-- Uses the partial index jobqueue_job_finished (state, finished_at); SKIP LOCKED lets several pruners share the work.
-- The literal state list repeats the index predicate, so the planner can use the index whatever %(states)s holds.
DELETE FROM jobqueue_job
WHERE id IN (
    SELECT id
    FROM jobqueue_job
    WHERE state = ANY(%(states)s::text[])
      AND state IN ('succeeded', 'dead', 'cancelled')
      AND finished_at < coalesce(%(now)s::timestamptz, now()) - make_interval(secs => %(older_than_s)s::float8)
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
