"""The Django admin for jobqueue: jobs, dead letters, workers, and the queue dashboard.

Each module registers one page; ``dashboard`` holds the dashboard's figures and view. Cron
entries get their own module beside these.
"""

from . import cron, dead_letters, jobs, workers  # noqa: F401  (each registers its ModelAdmin)
