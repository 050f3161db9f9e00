"""Internal: the read side for operators: queue status, job listings, health, metric values.

Every query here is an aggregate an index serves (the claim, lease, running, finished and dead
partial indexes of ``jobqueue_job``) or is bounded by a LIMIT, so the CLI, the health probe and a
Prometheus scrape stay cheap at millions of finished rows (FIELD-CASES 30). Writes go through
``jobqueue.client`` and ``prunejobs``; nothing here changes a job.
"""
