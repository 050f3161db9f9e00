# Concurrency limits (issue 18): two nullable columns and a partial index over leased rows with a
# key. The index builds CONCURRENTLY on PostgreSQL (docs/upgrading.md, "0018").

from django.db import migrations, models

from jobqueue.migrations._concurrently import AddFieldIfMissing, AddIndexWithoutBlockingWrites


class Migration(migrations.Migration):

    # CREATE INDEX CONCURRENTLY cannot run inside a transaction; each operation is re-runnable.
    atomic = False

    dependencies = [
        ('jobqueue', '0018_outbox'),
    ]

    operations = [
        # Nullable, no default: PostgreSQL adds the columns without rewriting the table.
        AddFieldIfMissing(
            model_name='job',
            name='concurrency_key',
            field=models.CharField(blank=True, help_text='At most concurrency_limit jobs of this key run at once, across all workers.', max_length=200, null=True),
        ),
        AddFieldIfMissing(
            model_name='job',
            name='concurrency_limit',
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        AddIndexWithoutBlockingWrites(
            model_name='job',
            index=models.Index(condition=models.Q(('state', 'leased'), ('concurrency_key__isnull', False)), fields=['concurrency_key'], name='jobqueue_job_conc_running'),
        ),
    ]
