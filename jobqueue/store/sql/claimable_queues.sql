-- claimable_queues: the queues that have ready or scheduled jobs, for a claim of every queue
-- (runworkers --queues '*'). Read before each such claim, so a queue created after the worker
-- started is served by its next claim; the claim then lists them (with constant arrays its row
-- estimates stay exact, which keeps it below jit_above_cost; see test_fairness).
--
-- A loose index scan of jobqueue_job_claim (queue, ...) over claimable rows: one index probe per
-- queue with claimable jobs, not a read of every claimable row.
WITH RECURSIVE found AS (
    SELECT (SELECT min(j.queue) FROM jobqueue_job AS j
            WHERE j.state IN ('ready', 'scheduled')) AS name
    UNION ALL
    SELECT (SELECT min(j.queue) FROM jobqueue_job AS j
            WHERE j.state IN ('ready', 'scheduled') AND j.queue > f.name)
    FROM found AS f
    WHERE f.name IS NOT NULL
)
SELECT name FROM found WHERE name IS NOT NULL
