-- record_depth: the claimed minute's depth sample: one row per queue (type '') with its claimable
-- count and oldest claimable age, and the totals into the row sample_depth.sql inserted.
WITH samples AS (
    SELECT * FROM unnest(%(queues)s::text[], %(ready)s::bigint[], %(lag_s)s::float8[])
        AS s(queue, ready, lag_s)
), per_queue AS (
    INSERT INTO jobqueue_rollup (minute, queue, type, ready, lag_s)
    SELECT %(minute)s::timestamptz, s.queue, '', s.ready, s.lag_s FROM samples AS s
    ON CONFLICT (minute, queue, type, shard) DO NOTHING
    RETURNING queue
)
UPDATE jobqueue_rollup AS r
SET ready = (SELECT coalesce(sum(s.ready), 0) FROM samples AS s),
    lag_s = (SELECT coalesce(max(s.lag_s), 0) FROM samples AS s)
WHERE r.minute = %(minute)s::timestamptz AND r.queue = '' AND r.type = '' AND r.shard = 0
RETURNING (SELECT count(*) FROM per_queue) AS queues
