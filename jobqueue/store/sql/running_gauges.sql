-- running_gauges: leased jobs per queue (queue set, tenant NULL), per tenant (tenant set,
-- queue NULL; the %(top)s tenants running the most) and per concurrency key (key set; the %(top)s
-- keys running the most, with the largest limit stored on their leased jobs). Leased rows only,
-- through the small partial indexes jobqueue_job_lease, jobqueue_job_running and
-- jobqueue_job_conc_running: as many rows as the workers' slots.
(SELECT j.queue, NULL::text AS tenant_id, count(*) AS n, NULL::text AS key, NULL::int AS key_limit
 FROM jobqueue_job AS j
 WHERE j.state = 'leased'
 GROUP BY j.queue)
UNION ALL
(SELECT NULL::text, j.tenant_id, count(*) AS n, NULL::text, NULL::int
 FROM jobqueue_job AS j
 WHERE j.state = 'leased'
 GROUP BY j.tenant_id
 ORDER BY n DESC, j.tenant_id
 LIMIT %(top)s)
UNION ALL
(SELECT NULL::text, NULL::text, count(*) AS n, j.concurrency_key, max(j.concurrency_limit)
 FROM jobqueue_job AS j
 WHERE j.state = 'leased' AND j.concurrency_key IS NOT NULL
 GROUP BY j.concurrency_key
 ORDER BY n DESC, j.concurrency_key
 LIMIT %(top)s)
