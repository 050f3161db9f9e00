-- running_gauges: leased jobs per queue (queue set, tenant NULL) and per tenant (tenant set,
-- queue NULL; the %(top)s tenants running the most). Leased rows only, through the small partial
-- indexes jobqueue_job_lease and jobqueue_job_running: as many rows as the workers' slots.
(SELECT j.queue, NULL::text AS tenant_id, count(*) AS n
 FROM jobqueue_job AS j
 WHERE j.state = 'leased'
 GROUP BY j.queue)
UNION ALL
(SELECT NULL::text, j.tenant_id, count(*) AS n
 FROM jobqueue_job AS j
 WHERE j.state = 'leased'
 GROUP BY j.tenant_id
 ORDER BY n DESC, j.tenant_id
 LIMIT %(top)s)
