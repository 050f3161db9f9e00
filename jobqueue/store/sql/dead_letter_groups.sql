-- dead_letter_groups: dead jobs grouped by their last error's type and message (jsonb -> -1), most first.
-- The dead rows through the partial index of finished rows (jobqueue_job_finished: state, finished_at).
SELECT coalesce(errors -> -1 ->> 'type', '') AS error_type,
       coalesce(errors -> -1 ->> 'message', '') AS message,
       count(*) AS n,
       min(finished_at) AS first_seen,
       max(finished_at) AS last_seen,
       max(id) AS newest_id
FROM jobqueue_job
WHERE state = 'dead'
GROUP BY 1, 2
ORDER BY n DESC, last_seen DESC, error_type, message
LIMIT %(limit)s
