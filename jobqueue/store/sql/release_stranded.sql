-- release_stranded: release each ordering key's first waiting job whose key parent ended unseen (issue 33); the reaper's tick.
-- A loose scan of jobqueue_job_ordering_wait (ordering_key, id): one probe per key with waiting jobs, then its first one.
-- Why: enqueue_in_order.sql links a job to its key's last job without a lock, so that job can finish after the
-- enqueue's snapshot and before its commit; the finish's trigger then does not see the link and the job would wait
-- for ever. Only a key's first waiting job can be so stranded for long: its parent has a smaller id, so it is not
-- waiting; the key's later ones wait behind it. The rows are taken SKIP LOCKED (a trigger releasing one now wins),
-- the link counted and the job released as the trigger does (ready, or scheduled till its run_at), queues woken.
WITH RECURSIVE keys AS (
    (SELECT w.ordering_key AS k FROM jobqueue_job AS w
     WHERE w.state = 'waiting' AND w.ordering_key IS NOT NULL
     ORDER BY w.ordering_key LIMIT 1)
    UNION ALL
    SELECT (SELECT w.ordering_key FROM jobqueue_job AS w
            WHERE w.state = 'waiting' AND w.ordering_key IS NOT NULL AND w.ordering_key > keys.k
            ORDER BY w.ordering_key LIMIT 1)
    FROM keys WHERE keys.k IS NOT NULL
),
heads AS (
    SELECT (SELECT w.id FROM jobqueue_job AS w
            WHERE w.state = 'waiting' AND w.ordering_key = keys.k ORDER BY w.id LIMIT 1) AS id
    FROM keys WHERE keys.k IS NOT NULL
),
stranded AS (
    SELECT c.id FROM jobqueue_job AS c
    WHERE c.id IN (SELECT heads.id FROM heads) AND c.state = 'waiting'
      AND EXISTS (SELECT 1 FROM jobqueue_jobparent AS l LEFT JOIN jobqueue_job AS p ON p.id = l.parent_id
                  WHERE l.child_id = c.id AND NOT l.counted AND l.run_on_parent_failure
                    AND (p.id IS NULL OR p.state IN ('succeeded', 'dead', 'cancelled')))
    ORDER BY c.id
    LIMIT %(limit)s
    FOR NO KEY UPDATE OF c SKIP LOCKED
),
edges AS (
    UPDATE jobqueue_jobparent AS l SET counted = true
    FROM stranded
    WHERE l.child_id = stranded.id AND NOT l.counted AND l.run_on_parent_failure
      AND NOT EXISTS (SELECT 1 FROM jobqueue_job AS p
                      WHERE p.id = l.parent_id AND p.state NOT IN ('succeeded', 'dead', 'cancelled'))
    RETURNING l.child_id
),
moved AS (
    UPDATE jobqueue_job AS c
    SET waiting_for = c.waiting_for - e.n,
        run_at = CASE WHEN c.waiting_for <= e.n THEN greatest(c.run_at, now()) ELSE c.run_at END,
        state = CASE WHEN c.waiting_for > e.n THEN c.state
                     WHEN c.run_at > now() THEN 'scheduled' ELSE 'ready' END
    FROM (SELECT edges.child_id, count(*) AS n FROM edges GROUP BY edges.child_id) AS e
    WHERE c.id = e.child_id
    RETURNING c.id, c.queue, c.state
)
SELECT (SELECT count(*) FROM moved WHERE moved.state <> 'waiting') AS released,
       (SELECT count(*) FROM (SELECT pg_notify('jobqueue_ready', q.queue)
                              FROM (SELECT DISTINCT moved.queue FROM moved WHERE moved.state = 'ready') AS q) AS n
       ) AS woken
