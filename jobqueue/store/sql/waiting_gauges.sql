-- waiting_gauges: jobs waiting for parent jobs (after=[...]) per queue, each counted up to
-- %(cap)s (status, metrics, dashboard).
--
-- A loose index scan of jobqueue_job_waiting (queue) over waiting rows: one probe per queue, then
-- a capped index-only count of it. A scrape reads at most %(cap)s entries per queue, however many
-- jobs wait.
WITH RECURSIVE
queues AS (
    SELECT (SELECT min(j.queue) FROM jobqueue_job AS j WHERE j.state = 'waiting') AS queue,
           1 AS n
    UNION ALL
    SELECT (SELECT min(j.queue) FROM jobqueue_job AS j
            WHERE j.state = 'waiting' AND j.queue > q.queue),
           q.n + 1
    FROM queues AS q
    WHERE q.queue IS NOT NULL AND q.n < %(max_queues)s
)
SELECT q.queue,
       (SELECT count(*) FROM (
            SELECT 1 FROM jobqueue_job AS j
            WHERE j.state = 'waiting' AND j.queue = q.queue
            LIMIT %(cap)s) AS c)::bigint AS waiting
FROM queues AS q
WHERE q.queue IS NOT NULL
ORDER BY q.queue
