-- wake_queues: wake the idle workers of these queues as an enqueue does (a slot of a full concurrency key was freed).
-- No table; one notification per queue, delivered at commit (this statement's own transaction).
SELECT pg_notify('jobqueue_ready', q) FROM unnest(%(queues)s::text[]) AS q
