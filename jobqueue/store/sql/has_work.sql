-- has_work: whether any of these queues holds a job a claim could take, now or later (ready or
-- scheduled, due or not). An idle worker whose last claim came back short asks this before it
-- claims again (worker/claiming.py): false means the claim would take nothing. One probe of the
-- claim index per queue, its first entry only; no lock, no write.
SELECT EXISTS (
    SELECT 1
    FROM unnest(%(queues)s::text[]) AS q(name)
    WHERE EXISTS (
        SELECT 1 FROM jobqueue_job AS j
        WHERE j.queue = q.name AND j.state IN ('ready', 'scheduled')
    )
) AS has_work
