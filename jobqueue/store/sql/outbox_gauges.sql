-- outbox_gauges: per queue database named in %(targets)s, how many outbox rows wait (capped at %(cap)s) and
-- the oldest's age in seconds (NULL: none). Index jobqueue_outbox_relay (target, id): at most %(cap)s entries per target.
SELECT t.target, w.waiting, extract(epoch FROM now() - o.created_at)::float8 AS oldest_age_s
FROM unnest(%(targets)s::text[]) AS t(target)
CROSS JOIN LATERAL (
    SELECT count(*) AS waiting
    FROM (SELECT 1 FROM jobqueue_outbox AS c WHERE c.target = t.target LIMIT %(cap)s) AS capped
) AS w
LEFT JOIN LATERAL (
    SELECT f.created_at FROM jobqueue_outbox AS f WHERE f.target = t.target ORDER BY f.id LIMIT 1
) AS o ON true
ORDER BY t.target
