-- dead_gauges: dead jobs per queue, each (type, queue) pair counted up to %(cap)s (metrics).
--
-- A loose index scan of jobqueue_job_dead (type, queue) over dead rows: one probe per type, one
-- per queue within it, then a capped index-only count of each pair. A scrape reads at most
-- %(cap)s entries per pair, however many dead letters there are; the per-queue sum is capped too.
WITH RECURSIVE
types AS (
    SELECT (SELECT min(j.type) FROM jobqueue_job AS j WHERE j.state = 'dead') AS type, 1 AS n
    UNION ALL
    SELECT (SELECT min(j.type) FROM jobqueue_job AS j WHERE j.state = 'dead' AND j.type > t.type),
           t.n + 1
    FROM types AS t
    WHERE t.type IS NOT NULL AND t.n < %(max_pairs)s
),
pairs AS (
    SELECT t.type,
           (SELECT min(j.queue) FROM jobqueue_job AS j
            WHERE j.state = 'dead' AND j.type = t.type) AS queue
    FROM types AS t
    WHERE t.type IS NOT NULL
    UNION ALL
    SELECT p.type,
           (SELECT min(j.queue) FROM jobqueue_job AS j
            WHERE j.state = 'dead' AND j.type = p.type AND j.queue > p.queue)
    FROM pairs AS p
    WHERE p.queue IS NOT NULL
)
SELECT p.queue,
       least(sum((SELECT count(*) FROM (
                      SELECT 1 FROM jobqueue_job AS j
                      WHERE j.state = 'dead' AND j.type = p.type AND j.queue = p.queue
                      LIMIT %(cap)s) AS c)), %(cap)s)::bigint AS dead
FROM pairs AS p
WHERE p.queue IS NOT NULL
GROUP BY p.queue
ORDER BY p.queue
