-- job_exists: tell "no such job" from "not in an eligible state" after cancel or retry matched nothing.
-- Primary-key lookup.
SELECT 1 FROM jobqueue_job WHERE id = %(id)s
