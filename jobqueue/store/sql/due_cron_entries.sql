-- due_cron_entries: the enabled cron entries whose next fire time is due by `until` (now + lookahead), or unset.
-- Uses the partial index jobqueue_cron_due (next_fire_at) WHERE enabled.
SELECT id, name, cron_expr, timezone, queue, job_type, payload, priority, missed, missed_cap,
       next_fire_at, last_fired_at
FROM jobqueue_cronentry
WHERE enabled AND (next_fire_at IS NULL OR next_fire_at <= %(until)s::timestamptz)
ORDER BY next_fire_at NULLS FIRST, id
LIMIT %(limit)s
