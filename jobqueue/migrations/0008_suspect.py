# Job.suspect (hardening item 11): set when a job's worker process died while it ran beside
# other jobs; such a job next runs alone. A database default, so raw inserts keep working and
# the column is added without rewriting the table.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('jobqueue', '0007_dependency_breakers'),
    ]

    operations = [
        migrations.AddField(
            model_name='job',
            name='suspect',
            field=models.BooleanField(db_default=False, default=False, help_text='Its worker process died while it ran beside other jobs; it next runs alone.'),
        ),
    ]
