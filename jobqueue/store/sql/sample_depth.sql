-- sample_depth: once a minute, each queue's claimable jobs (ready, or scheduled and due) and the age of its oldest,
-- as the rollup rows (minute, queue, type '') of jobqueue/rollup_model.py; the row (minute, '', '') holds the totals
-- and marks the minute sampled: a later call in the same minute (any worker) finds it and counts nothing.
-- Samples are shard 0 (the column's default). Reads the claim index jobqueue_job_claim over the claimable rows only; written at most once a minute cluster-wide.
WITH clock AS (
    SELECT date_trunc('minute', coalesce(%(now)s::timestamptz, now())) AS minute,
           coalesce(%(now)s::timestamptz, now()) AS at
), fresh AS (
    SELECT c.minute, c.at FROM clock AS c
    WHERE NOT EXISTS (SELECT 1 FROM jobqueue_rollup AS r
                      WHERE r.minute = c.minute AND r.queue = '' AND r.type = '')
), per_queue AS (
    SELECT f.minute, j.queue, count(*) AS ready,
           greatest(extract(epoch FROM f.at - min(j.run_at)), 0)::float8 AS lag_s
    FROM fresh AS f
    JOIN jobqueue_job AS j ON j.state IN ('ready', 'scheduled') AND j.run_at <= f.at
    GROUP BY f.minute, f.at, j.queue
)
INSERT INTO jobqueue_rollup (minute, queue, type, ready, lag_s)
SELECT minute, queue, '', ready, lag_s FROM per_queue
UNION ALL
SELECT f.minute, '', '', coalesce((SELECT sum(ready) FROM per_queue), 0),
       coalesce((SELECT max(lag_s) FROM per_queue), 0)
FROM fresh AS f
ON CONFLICT (minute, queue, type, shard) DO NOTHING
RETURNING queue
