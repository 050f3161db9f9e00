-- resume: lift the pause of a queue or a job type, and wake idle workers at commit: the queue's
-- channel message for a queue; for a type, one per queue holding claimable jobs of it (a scan of
-- the claimable rows through the claim's partial index: an operator's rare action, not a hot path).
-- Unique index jobqueue_pause_kind_name (kind, name). Returns the lifted row, none if not paused.
WITH gone AS (
    DELETE FROM jobqueue_pause
    WHERE kind = %(kind)s AND name = %(name)s
    RETURNING kind, name, paused_by, paused_at, reason
),
woken AS (
    SELECT pg_notify('jobqueue_ready', w.queue)
    FROM (SELECT g.name AS queue FROM gone AS g WHERE g.kind = 'queue'
          UNION
          SELECT j.queue FROM gone AS g
          JOIN jobqueue_job AS j ON j.type = g.name
          WHERE g.kind = 'type' AND j.state IN ('ready', 'scheduled')) AS w
)
SELECT g.kind, g.name, g.paused_by, g.paused_at, g.reason, (SELECT count(*) FROM woken) AS woken
FROM gone AS g
