# Circuit breakers per dependency and retry budgets per queue (issue 9). Self-contained: it
# creates two new tables and touches nothing else, so it can be re-chained after 0005/0006.

import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('jobqueue', '0006_notify'),
    ]

    operations = [
        migrations.CreateModel(
            name='DependencyBreaker',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(max_length=100, unique=True)),
                ('state', models.CharField(choices=[('closed', 'closed'), ('open', 'open'), ('half_open', 'half-open')], default='closed', max_length=16)),
                ('window_started_at', models.DateTimeField(default=django.utils.timezone.now, help_text='Start of the window failures are counted in.')),
                ('failures', models.PositiveIntegerField(default=0, help_text='Failures in the window.')),
                ('successes', models.PositiveIntegerField(default=0, help_text='Successes in the window.')),
                ('open_until', models.DateTimeField(blank=True, help_text='End of the cool-down; then one probe job may run.', null=True)),
                ('cooldown_s', models.FloatField(default=0.0, help_text='The current cool-down; doubles per failed probe.', verbose_name='cool-down (s)')),
                ('probe_job_id', models.BigIntegerField(blank=True, null=True)),
                ('probe_until', models.DateTimeField(blank=True, help_text='When an unanswered probe lapses and another may run.', null=True)),
                ('opened_count', models.PositiveIntegerField(default=0, verbose_name='times opened')),
                ('last_opened_at', models.DateTimeField(blank=True, null=True)),
                ('reason', models.CharField(blank=True, default='', max_length=200)),
                ('updated_at', models.DateTimeField(default=django.utils.timezone.now)),
            ],
            options={
                'verbose_name': 'dependency breaker',
                'ordering': ['name'],
                'permissions': [('operate_dependencybreaker', 'Can open or close circuit breakers')],
            },
        ),
        migrations.CreateModel(
            name='RetryBudget',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('queue', models.CharField(max_length=100, unique=True)),
                ('tokens', models.FloatField(default=0.0)),
                ('updated_at', models.DateTimeField(default=django.utils.timezone.now)),
            ],
            options={
                'verbose_name': 'retry budget',
                'ordering': ['queue'],
            },
        ),
    ]
