-- dead_letter_ids: the newest %(limit)s dead jobs whose last error has this type and message (by its md5).
-- The dead rows through the partial index of finished rows (jobqueue_job_finished: state, finished_at).
SELECT id
FROM jobqueue_job
WHERE state = 'dead'
  AND coalesce(errors -> -1 ->> 'type', '') = %(error_type)s
  AND md5(coalesce(errors -> -1 ->> 'message', '')) = %(digest)s
ORDER BY id DESC
LIMIT %(limit)s
