-- claimable_queues: the next %(limit)s queues with ready or scheduled jobs after %(after)s by name,
-- then (lap 1) from the first name on: the window of a claim of every queue (--queues '*').
-- Read before each such claim, so a queue created after the worker started is served in its turn;
-- the claim then lists the window (with constant arrays its row estimates stay exact, which keeps
-- it below jit_above_cost; see test_fairness). Listed, excluded (%(skip)s) and paused queues are
-- read past. A window, not every queue: a claim's work no longer grows with the number of queues
-- (issue 33: at 10,000 queues the claim of all of them took 1.2 s).
--
-- A loose index scan of jobqueue_job_claim (queue, ...) over claimable rows: one index probe per
-- queue read, and each lap stops at its LIMIT (a recursive CTE is evaluated as far as it is read).
WITH RECURSIVE after_cursor AS (
    SELECT (SELECT min(j.queue) FROM jobqueue_job AS j
            WHERE j.state IN ('ready', 'scheduled') AND j.queue > %(after)s) AS name
    UNION ALL
    SELECT (SELECT min(j.queue) FROM jobqueue_job AS j
            WHERE j.state IN ('ready', 'scheduled') AND j.queue > a.name)
    FROM after_cursor AS a
    WHERE a.name IS NOT NULL
),
from_first AS (
    SELECT (SELECT min(j.queue) FROM jobqueue_job AS j
            WHERE j.state IN ('ready', 'scheduled')) AS name
    UNION ALL
    SELECT (SELECT min(j.queue) FROM jobqueue_job AS j
            WHERE j.state IN ('ready', 'scheduled') AND j.queue > f.name)
    FROM from_first AS f
    WHERE f.name IS NOT NULL AND f.name < %(after)s
)
(SELECT 0 AS lap, a.name FROM after_cursor AS a
 WHERE a.name IS NOT NULL AND a.name <> ALL(%(skip)s::text[])
   AND NOT EXISTS (SELECT 1 FROM jobqueue_pause AS p WHERE p.kind = 'queue' AND p.name = a.name)
 LIMIT %(limit)s)
UNION ALL
(SELECT 1 AS lap, f.name FROM from_first AS f
 WHERE f.name IS NOT NULL AND f.name <= %(after)s AND f.name <> ALL(%(skip)s::text[])
   AND NOT EXISTS (SELECT 1 FROM jobqueue_pause AS p WHERE p.kind = 'queue' AND p.name = f.name)
 LIMIT %(limit)s)
