-- touch_worker: mark a worker seen now, with how many jobs it runs and its status (running, draining).
-- One row by the unique index on jobqueue_worker.worker_id. One statement, so sent in autocommit with the transaction limits in front (one round trip).
UPDATE jobqueue_worker
SET last_seen_at = statement_timestamp(), running_jobs = %(running_jobs)s, status = %(status)s
WHERE worker_id = %(worker_id)s
