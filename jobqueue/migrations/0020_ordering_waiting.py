# Ordering keys off the claim's path (issues 15 and 18): a job enqueued while its ordering key has
# a live or waiting job waits (state 'waiting') for the key's last one, linked to it as a parent
# (jobqueue_jobparent, run_on_parent_failure), and migration 0015's trigger releases it when that
# one ends. This partial index finds the key's last waiting job; it holds only waiting rows with a
# key. Built CONCURRENTLY on PostgreSQL.

from django.db import migrations, models

from jobqueue.migrations._concurrently import AddIndexWithoutBlockingWrites


class Migration(migrations.Migration):

    # CREATE INDEX CONCURRENTLY cannot run inside a transaction; the operation is re-runnable.
    atomic = False

    dependencies = [
        ('jobqueue', '0019_concurrency_limits'),
    ]

    operations = [
        AddIndexWithoutBlockingWrites(
            model_name='job',
            index=models.Index(condition=models.Q(('state', 'waiting'), ('ordering_key__isnull', False)), fields=['ordering_key', 'id'], name='jobqueue_job_ordering_wait'),
        ),
    ]
