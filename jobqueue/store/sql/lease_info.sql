-- lease_info: the attempt counters of a job still held under this token.
-- Primary-key lookup, fenced like every write.
SELECT id, lease_token, type, attempts, max_attempts
FROM jobqueue_job
WHERE id = %(id)s AND lease_token = %(lease_token)s::uuid AND state = 'leased'
