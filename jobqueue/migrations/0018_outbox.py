# The transactional outbox (issue 16 part 3): jobs enqueued inside a transaction on this database
# for a queue on another one wait here until a worker relays them. A new small table: nothing on
# jobqueue_job. It must migrate on every alias that holds callers' transactions (docs/decisions.md).

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('jobqueue', '0017_rate_limits'),
    ]

    operations = [
        migrations.CreateModel(
            name='OutboxEntry',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('target', models.CharField(max_length=100)),
                ('job_id', models.BigIntegerField()),
                ('job', models.JSONField()),
                ('created_at', models.DateTimeField()),
            ],
            options={
                'db_table': 'jobqueue_outbox', 'verbose_name': 'outbox entry',
                'verbose_name_plural': 'outbox entries',
                'indexes': [models.Index(fields=['target', 'id'], name='jobqueue_outbox_relay')],
                'constraints': [models.UniqueConstraint(fields=('target', 'job_id'), name='jobqueue_outbox_job')],
            },
        ),
    ]
