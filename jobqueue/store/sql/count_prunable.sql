-- count_prunable: how many jobs prune.sql would delete now (for --dry-run); nothing is locked or changed.
-- Uses the partial index jobqueue_job_finished (state, finished_at), index-only where the visibility map allows.
SELECT count(*) AS prunable
FROM jobqueue_job
WHERE state = ANY(%(states)s::text[])
  AND state IN ('succeeded', 'dead', 'cancelled')
  AND finished_at < coalesce(%(now)s::timestamptz, now()) - make_interval(secs => %(older_than_s)s::float8)
