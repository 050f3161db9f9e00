-- find_live_dedupe: the live job holding a dedupe key, after enqueue's insert gave way to it.
-- Uses the partial unique index jobqueue_job_live_dedupe_key.
SELECT id, created_at FROM jobqueue_job
WHERE queue = %(queue)s AND dedupe_key = %(dedupe_key)s
  AND state IN ('leased', 'ready', 'scheduled')
