# The claim's probe of a lane's rate-limited types seeks each type (store/sql/claim.sql): a partial
# index over claimable rows by (queue, tenant, type, priority DESC, run_at, id). It builds
# CONCURRENTLY on PostgreSQL (docs/upgrading.md).

from django.db import migrations, models

from jobqueue.migrations._concurrently import AddIndexWithoutBlockingWrites


class Migration(migrations.Migration):

    # CREATE INDEX CONCURRENTLY cannot run inside a transaction; the operation is re-runnable.
    atomic = False

    dependencies = [
        ('jobqueue', '0024_trace_context'),
    ]

    operations = [
        AddIndexWithoutBlockingWrites(
            model_name='job',
            index=models.Index(condition=models.Q(('state__gte', 'ready'), ('state__lte', 'scheduled')), fields=['queue', 'tenant_id', 'type', '-priority', 'run_at', 'id'], name='jobqueue_job_claim_type'),
        ),
    ]
