# Metrics (FIELD-CASES 30): the cluster-wide gauge reading, one row, recomputed by one process
# per interval and served to every scrape.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('jobqueue', '0010_listener_up'),
    ]

    operations = [
        migrations.CreateModel(
            name='GaugeSnapshot',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(max_length=100, unique=True)),
                ('body', models.TextField(blank=True, default='')),
                ('computed_at', models.DateTimeField(blank=True, null=True)),
                ('computing_until', models.DateTimeField(blank=True, null=True)),
            ],
            options={
                'verbose_name': 'gauge snapshot',
            },
        ),
    ]
