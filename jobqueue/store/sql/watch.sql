-- watch: mark a job as waited on (jobqueue.wait), so finishing it notifies 'jobqueue_finished'
-- (migration 0013_progress's trigger), and return its state. Written only once per job; a row
-- locked by its finishing transaction is waited on, then read as that transaction left it.
-- Primary-key lookups. No row: no such job.
WITH marked AS (
    UPDATE jobqueue_job SET watched = true
    WHERE id = %(id)s AND NOT watched
    RETURNING state
)
SELECT state FROM marked
UNION ALL
SELECT state FROM jobqueue_job WHERE id = %(id)s AND NOT EXISTS (SELECT 1 FROM marked)
