# Progress, checkpoints and waiters (issue 19). Plain nullable columns (and one with a database
# default): adding them rewrites nothing and takes the table lock for an instant. No index: they
# are read by primary key only.
#
# PostgreSQL only: a row trigger sends pg_notify('jobqueue_finished', '<id>') when a job that
# someone waits on (``watched``, set by jobqueue.wait) reaches succeeded, dead or cancelled,
# whichever statement moved it (finish_many, cancel, release, hand-back). Its WHEN clause is
# checked in C for each updated row and queues nothing for an unwatched job, so the finish path
# of jobs nobody waits on sends no notification and runs no function.

from django.db import migrations, models

#: Keep in sync with ``jobqueue.store.interface.FINISHED_CHANNEL``.
CHANNEL = "jobqueue_finished"

NOTIFY_SQL = f"""
CREATE OR REPLACE FUNCTION jobqueue_notify_finished() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('{CHANNEL}', NEW.id::text);
    RETURN NULL;
END
$$;
CREATE TRIGGER jobqueue_job_notify_finished
    AFTER UPDATE OF state ON jobqueue_job
    FOR EACH ROW
    WHEN (NEW.watched AND NEW.state IN ('succeeded', 'dead', 'cancelled')
          AND OLD.state IS DISTINCT FROM NEW.state)
    EXECUTE FUNCTION jobqueue_notify_finished();
"""

UNNOTIFY_SQL = """
DROP TRIGGER IF EXISTS jobqueue_job_notify_finished ON jobqueue_job;
DROP FUNCTION IF EXISTS jobqueue_notify_finished();
"""


def _postgres_only(sql):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(sql)

    return run


class Migration(migrations.Migration):

    dependencies = [
        ('jobqueue', '0012_dashboard_link'),
    ]

    operations = [
        migrations.AddField(
            model_name='job',
            name='progress_done',
            field=models.BigIntegerField(blank=True, help_text='Steps done.', null=True),
        ),
        migrations.AddField(
            model_name='job',
            name='progress_total',
            field=models.BigIntegerField(blank=True, help_text='Steps in all.', null=True),
        ),
        migrations.AddField(
            model_name='job',
            name='checkpoint',
            field=models.JSONField(blank=True, help_text='The next attempt resumes.', null=True),
        ),
        migrations.AddField(
            model_name='job',
            name='checkpoint_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='job',
            name='watched',
            field=models.BooleanField(db_default=False, default=False, help_text='Waited on.'),
        ),
        migrations.RunPython(_postgres_only(NOTIFY_SQL), _postgres_only(UNNOTIFY_SQL)),
    ]
