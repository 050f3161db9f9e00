# The W3C trace context of a job's enqueue (traceparent, tracestate), stored when OpenTelemetry is
# installed and traced it (jobqueue/tracing.py): the worker's run span is its child. Nullable with
# no default, so adding it rewrites no row and an enqueue without tracing writes nothing more.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("jobqueue", "0023_lanes")]

    operations = [
        migrations.AddField(
            model_name="job",
            name="trace",
            field=models.JSONField(
                blank=True,
                help_text="W3C trace context of the enqueue (OpenTelemetry).",
                null=True,
            ),
        ),
    ]
