-- dead_worker_leases: lock every lease held under the id of a worker process that died (hand_back).
-- Uses the partial index jobqueue_job_lease (lease_until) WHERE state = 'leased': leased rows only.
SELECT id, lease_token, type, attempts, max_attempts, leased_by, lease_until
FROM jobqueue_job
WHERE state = 'leased' AND leased_by = %(worker_id)s
ORDER BY id
FOR UPDATE
