# The claim's lanes (docs/fairness.md, docs/decisions.md "The claim in two levels"): one row per
# (queue, tenant) holding the lane's virtual time, written by the claim only. Nothing is
# backfilled and jobqueue_job is not touched: a lane without a row enters at the front of its
# queue, so the migration takes no lock on the jobs table (docs/upgrading.md).

import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('jobqueue', '0022_ordering_unlocked'),
    ]

    operations = [
        migrations.CreateModel(
            name='Lane',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('queue', models.CharField(max_length=100)),
                ('tenant_id', models.CharField(blank=True, default='', max_length=100)),
                ('vtime', models.FloatField(default=0.0, help_text='Virtual time: jobs served / weight.')),
                ('served_at', models.DateTimeField(default=django.utils.timezone.now, help_text='Last served (database clock).')),
            ],
            options={
                'verbose_name': 'lane',
                'db_table': 'jobqueue_lane',
                'ordering': ['queue', 'tenant_id'],
                'constraints': [models.UniqueConstraint(fields=('queue', 'tenant_id'), name='jobqueue_lane_queue_tenant')],
            },
        ),
    ]
