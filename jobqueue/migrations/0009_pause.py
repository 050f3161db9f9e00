# Pause and resume (issue 17): one row per paused queue or job type. Every claim reads this
# table (NOT EXISTS on the unique (kind, name) index), so it stays a handful of rows.

import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('jobqueue', '0008_suspect'),
    ]

    operations = [
        migrations.CreateModel(
            name='Pause',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('kind', models.CharField(choices=[('queue', 'queue'), ('type', 'job type')], default='queue', max_length=8)),
                ('name', models.CharField(help_text='The queue name, or the job type name.', max_length=200)),
                ('paused_by', models.CharField(blank=True, default='', max_length=200)),
                ('paused_at', models.DateTimeField(default=django.utils.timezone.now, verbose_name='paused since')),
                ('reason', models.CharField(blank=True, default='', max_length=200)),
            ],
            options={
                'verbose_name': 'pause',
                'ordering': ['kind', 'name'],
                'constraints': [models.UniqueConstraint(fields=('kind', 'name'), name='jobqueue_pause_kind_name')],
            },
        ),
    ]
