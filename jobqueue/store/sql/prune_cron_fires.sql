-- prune_cron_fires: delete fire records older than the retention horizon, except each entry's latest one.
-- Uses jobqueue_cronfire_time (fire_time) for the old rows and jobqueue_cronfire_once (entry_id, fire_time) for each entry's latest.
DELETE FROM jobqueue_cronfire
WHERE id IN (
    SELECT f.id
    FROM jobqueue_cronfire AS f
    WHERE f.fire_time < %(older_than)s::timestamptz
      AND EXISTS (SELECT 1 FROM jobqueue_cronfire AS g
                  WHERE g.entry_id = f.entry_id AND g.fire_time > f.fire_time)
    ORDER BY f.id
    LIMIT %(limit)s
)
