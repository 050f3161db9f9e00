# Listener health (FIELD-CASES 26): each worker row says whether its LISTEN connection is up
# (None for a worker that polls without LISTEN). A nullable column: no table rewrite.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('jobqueue', '0009_pause'),
    ]

    operations = [
        migrations.AddField(
            model_name='worker',
            name='listener_up',
            field=models.BooleanField(blank=True, help_text='Its LISTEN connection is up (None: it polls, no LISTEN).', null=True),
        ),
    ]
