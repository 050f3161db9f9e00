-- take_retry_tokens: spend one token per retry from each queue's bucket, after refilling it at the floor rate
-- since its last update; returns the tokens left (negative: a debt the retries wait off). Unique index on queue.
INSERT INTO jobqueue_retrybudget AS b (queue, tokens, updated_at)
SELECT r.queue, %(capacity)s::float8 - r.n, coalesce(%(now)s::timestamptz, now())
FROM unnest(%(queues)s::text[], %(counts)s::int[]) AS r(queue, n)
ORDER BY r.queue
ON CONFLICT (queue) DO UPDATE
SET tokens = least(%(capacity)s::float8,
                   b.tokens + %(floor_per_second)s::float8
                       * greatest(extract(epoch FROM EXCLUDED.updated_at - b.updated_at), 0))
             - (%(capacity)s::float8 - EXCLUDED.tokens),
    updated_at = greatest(b.updated_at, EXCLUDED.updated_at)
RETURNING b.queue, b.tokens
