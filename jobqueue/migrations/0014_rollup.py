# The per-minute rollup (issue 17): one row per (minute, queue, job type) of outcome counts and
# pickup/run histograms, added by finish_many in the statement that records outcomes, and one row
# per (minute, queue) of sampled depth and lag. Split over ROLLUP_SHARDS slots (shard) so concurrent
# finishers do not queue on one row lock; readers sum over shard. Its own small table: nothing on jobqueue_job.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('jobqueue', '0013_progress'),
    ]

    operations = [
        migrations.CreateModel(
            name='Rollup',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('minute', models.DateTimeField(help_text='Start of the minute (database clock).')),
                ('queue', models.CharField(max_length=100)),
                ('type', models.CharField(blank=True, default='', max_length=200, verbose_name='job type')),
                ('shard', models.SmallIntegerField(db_default=0, default=0, help_text="Writer's slot, 0..15; sum over it.")),
                ('succeeded', models.BigIntegerField(db_default=0, default=0)),
                ('retried', models.BigIntegerField(db_default=0, default=0, help_text='Failed runs that will run again.')),
                ('dead', models.BigIntegerField(db_default=0, default=0)),
                ('cancelled', models.BigIntegerField(db_default=0, default=0)),
                ('expired', models.BigIntegerField(db_default=0, default=0, help_text='Runs the reaper ended: their lease ran out (retried or dead too).')),
                ('pickup_count', models.BigIntegerField(db_default=0, default=0)),
                ('pickup_sum_s', models.FloatField(db_default=0.0, default=0.0)),
                ('run_count', models.BigIntegerField(db_default=0, default=0)),
                ('run_sum_s', models.FloatField(db_default=0.0, default=0.0)),
                ('ready', models.BigIntegerField(blank=True, help_text='Claimable jobs, sampled.', null=True)),
                ('lag_s', models.FloatField(blank=True, help_text='Oldest claimable age, sampled.', null=True)),
                ('pickup_le_00', models.BigIntegerField(db_default=0, default=0, help_text='Runs with pickup <= 0.01 s.')),
                ('pickup_le_01', models.BigIntegerField(db_default=0, default=0, help_text='Runs with pickup <= 0.05 s.')),
                ('pickup_le_02', models.BigIntegerField(db_default=0, default=0, help_text='Runs with pickup <= 0.1 s.')),
                ('pickup_le_03', models.BigIntegerField(db_default=0, default=0, help_text='Runs with pickup <= 0.25 s.')),
                ('pickup_le_04', models.BigIntegerField(db_default=0, default=0, help_text='Runs with pickup <= 0.5 s.')),
                ('pickup_le_05', models.BigIntegerField(db_default=0, default=0, help_text='Runs with pickup <= 1.0 s.')),
                ('pickup_le_06', models.BigIntegerField(db_default=0, default=0, help_text='Runs with pickup <= 2.5 s.')),
                ('pickup_le_07', models.BigIntegerField(db_default=0, default=0, help_text='Runs with pickup <= 5.0 s.')),
                ('pickup_le_08', models.BigIntegerField(db_default=0, default=0, help_text='Runs with pickup <= 10.0 s.')),
                ('pickup_le_09', models.BigIntegerField(db_default=0, default=0, help_text='Runs with pickup <= 30.0 s.')),
                ('pickup_le_10', models.BigIntegerField(db_default=0, default=0, help_text='Runs with pickup <= 60.0 s.')),
                ('pickup_le_11', models.BigIntegerField(db_default=0, default=0, help_text='Runs with pickup <= 300.0 s.')),
                ('run_le_00', models.BigIntegerField(db_default=0, default=0, help_text='Runs with run <= 0.01 s.')),
                ('run_le_01', models.BigIntegerField(db_default=0, default=0, help_text='Runs with run <= 0.05 s.')),
                ('run_le_02', models.BigIntegerField(db_default=0, default=0, help_text='Runs with run <= 0.1 s.')),
                ('run_le_03', models.BigIntegerField(db_default=0, default=0, help_text='Runs with run <= 0.25 s.')),
                ('run_le_04', models.BigIntegerField(db_default=0, default=0, help_text='Runs with run <= 0.5 s.')),
                ('run_le_05', models.BigIntegerField(db_default=0, default=0, help_text='Runs with run <= 1.0 s.')),
                ('run_le_06', models.BigIntegerField(db_default=0, default=0, help_text='Runs with run <= 2.5 s.')),
                ('run_le_07', models.BigIntegerField(db_default=0, default=0, help_text='Runs with run <= 5.0 s.')),
                ('run_le_08', models.BigIntegerField(db_default=0, default=0, help_text='Runs with run <= 10.0 s.')),
                ('run_le_09', models.BigIntegerField(db_default=0, default=0, help_text='Runs with run <= 30.0 s.')),
                ('run_le_10', models.BigIntegerField(db_default=0, default=0, help_text='Runs with run <= 60.0 s.')),
                ('run_le_11', models.BigIntegerField(db_default=0, default=0, help_text='Runs with run <= 300.0 s.')),
            ],
            options={
                'verbose_name': 'rollup',
                'constraints': [models.UniqueConstraint(fields=('minute', 'queue', 'type', 'shard'), name='jobqueue_rollup_key')],
            },
        ),
    ]
