-- sample_depth: claim this minute's depth sample: the totals row (minute, '', '') of
-- jobqueue/models/rollups.py, written first with zero counts. Only the call that inserts it goes on
-- to count (queue_gauges.sql's capped walk, then record_depth.sql, in the same transaction); a
-- later call in the same minute, from any worker, finds it and counts nothing. Returns the
-- minute and the clock reading the sample is taken at, or no row.
-- Samples are shard 0 (the column's default).
INSERT INTO jobqueue_rollup (minute, queue, type, ready, lag_s)
VALUES (date_trunc('minute', coalesce(%(now)s::timestamptz, now())), '', '', 0, 0)
ON CONFLICT (minute, queue, type, shard) DO NOTHING
RETURNING minute, coalesce(%(now)s::timestamptz, now()) AS at
