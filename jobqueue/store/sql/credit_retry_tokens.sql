-- credit_retry_tokens: add ratio tokens per success (and the floor since the last update) to each queue's bucket.
-- Unique index on queue; only queues that ever retried have a row (the others' buckets are full).
UPDATE jobqueue_retrybudget AS b
SET tokens = least(%(capacity)s::float8,
                   b.tokens + %(ratio)s::float8 * c.n + %(floor_per_second)s::float8
                       * greatest(extract(epoch FROM coalesce(%(now)s::timestamptz, now()) - b.updated_at), 0)),
    updated_at = greatest(b.updated_at, coalesce(%(now)s::timestamptz, now()))
FROM unnest(%(queues)s::text[], %(counts)s::int[]) AS c(queue, n)
WHERE b.queue = c.queue
