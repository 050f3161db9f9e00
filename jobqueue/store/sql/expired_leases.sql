-- expired_leases: lock the leases that ran out, oldest id first, skipping rows an ack is writing now.
-- Uses the partial index jobqueue_job_lease (lease_until) WHERE state = 'leased'.
SELECT id, lease_token, type, attempts, max_attempts, leased_by, lease_until
FROM jobqueue_job
WHERE state = 'leased' AND lease_until < coalesce(%(now)s::timestamptz, now())
ORDER BY id
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED
