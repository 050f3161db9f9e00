"""The Django admin for jobqueue: jobs, dead letters, workers, and the queue dashboard.

Each module registers one page; ``dashboard`` holds the dashboard's figures and view. Cron
entries and dependency breakers (with retry budgets) get their own modules beside these.
"""

# Each registers its ModelAdmin.
from jobqueue.admin import batches, breakers, cron, dead_letters, jobs, pauses, workers  # noqa: F401
