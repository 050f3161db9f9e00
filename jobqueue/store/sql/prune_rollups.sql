-- prune_rollups: delete up to %(limit)s rollup rows (jobqueue/models/rollups.py) of minutes before now() - older_than_s.
-- The unique key (minute, queue, type) leads with minute: an index range, oldest first.
DELETE FROM jobqueue_rollup
WHERE id = ANY(ARRAY(
    SELECT id FROM jobqueue_rollup
    WHERE minute < coalesce(%(now)s::timestamptz, now()) - make_interval(secs => %(older_than_s)s::float8)
    ORDER BY minute
    LIMIT %(limit)s
))
