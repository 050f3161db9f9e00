-- concurrency_gauges: leased jobs per concurrency key, the %(top)s keys running the most, with the
-- largest limit stored on their leased jobs. Through jobqueue_job_conc_running (leased rows with a key).
SELECT j.concurrency_key AS key, count(*) AS n, max(j.concurrency_limit) AS key_limit
FROM jobqueue_job AS j
WHERE j.state = 'leased' AND j.concurrency_key IS NOT NULL
GROUP BY j.concurrency_key
ORDER BY n DESC, j.concurrency_key
LIMIT %(top)s
