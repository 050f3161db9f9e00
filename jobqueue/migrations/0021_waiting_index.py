# Waiting jobs counted (status, metrics, dashboard): a partial index over waiting rows only, so
# counting them reads no other row. It builds CONCURRENTLY on PostgreSQL (docs/upgrading.md).

from django.db import migrations, models

from jobqueue.migrations._concurrently import AddIndexWithoutBlockingWrites


class Migration(migrations.Migration):

    # CREATE INDEX CONCURRENTLY cannot run inside a transaction; the operation is re-runnable.
    atomic = False

    dependencies = [
        ('jobqueue', '0020_ordering_waiting'),
    ]

    operations = [
        AddIndexWithoutBlockingWrites(
            model_name='job',
            index=models.Index(condition=models.Q(('state', 'waiting')), fields=['queue'], name='jobqueue_job_waiting'),
        ),
    ]
