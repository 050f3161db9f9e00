-- estimate_prunable: EXPLAIN only (no row is read): the planner's row estimate for one state's
-- jobs past retention, for the metrics' count of rows awaiting prune past its cap.
EXPLAIN (FORMAT JSON)
SELECT 1
FROM jobqueue_job AS j
WHERE j.state = %(state)s
  AND j.state IN ('succeeded', 'dead', 'cancelled')
  AND j.finished_at < coalesce(%(now)s::timestamptz, now()) - make_interval(secs => %(older_than_s)s::float8)
