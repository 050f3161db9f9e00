-- delete_retry_budgets: an operator's reset of retry budgets (the admin's delete). A queue without
-- a bucket starts with a full one at its next retry, so deleting a bucket refills it.
DELETE FROM jobqueue_retrybudget WHERE queue = ANY(%(queues)s::text[])
