# Batches (issue 19): the jobqueue_batch table, a nullable jobqueue_job.batch_id, a partial index
# of batch members (built CONCURRENTLY on PostgreSQL), and one row trigger per vendor.
#
# Adding a nullable column without a default rewrites nothing: the ALTER TABLE takes the table's
# ACCESS EXCLUSIVE lock for an instant (docs/upgrading.md). No foreign key: validating one would
# scan the jobs table under a lock that blocks writes.
#
# Where batch counts move (docs/decisions.md, "Batches"). The hot path, a run's outcome (leased
# to succeeded, dead or cancelled, its attempt kept: the worker's acks and nacks, the reaper, a
# dead process's charged job), is counted by finish_many.sql itself, one update per batch per
# statement. Every other transition into or out of succeeded, dead or cancelled (cancel of a
# waiting member, operator retry, a release or hand-back of a job whose cancel was requested,
# which refund the attempt) is counted by this trigger: AFTER UPDATE OF state, FOR EACH ROW,
# only WHEN the row has a batch_id and enters or leaves a finished state; the WHEN clause is
# checked in C, so jobs without a batch run no function. On SQLite (one writer at a time, no
# finish_many.sql) the trigger counts every transition. Both fire the callbacks in the
# statement whose update brought pending to zero, under the batch row's lock: of two last
# members finishing at once, the second sees the first's counts and only one sees zero.

from django.db import migrations, models
import django.utils.timezone

from jobqueue.migrations._concurrently import AddIndexWithoutBlockingWrites

FINISHED = "('succeeded', 'dead', 'cancelled')"

POSTGRES_SQL = f"""
CREATE OR REPLACE FUNCTION jobqueue_batch_member_moved() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    was_done boolean := OLD.state IN {FINISHED};
    is_done boolean := NEW.state IN {FINISHED};
    b jobqueue_batch;
    cb record;
    new_id bigint;
BEGIN
    UPDATE jobqueue_batch SET
        pending = pending + was_done::int - is_done::int,
        succeeded = succeeded + (NEW.state = 'succeeded')::int - (OLD.state = 'succeeded')::int,
        dead = dead + (NEW.state = 'dead')::int - (OLD.state = 'dead')::int,
        cancelled = cancelled + (NEW.state = 'cancelled')::int - (OLD.state = 'cancelled')::int,
        completions = completions + (is_done AND NOT was_done AND pending = 1)::int,
        completed_at = CASE WHEN is_done AND NOT was_done AND pending = 1 THEN now()
                            WHEN was_done AND NOT is_done THEN NULL
                            ELSE completed_at END
    WHERE id = NEW.batch_id
    RETURNING * INTO b;
    IF NOT FOUND OR NOT (is_done AND NOT was_done AND b.pending = 0) THEN
        RETURN NULL;
    END IF;
    FOR cb IN
        SELECT * FROM jsonb_to_recordset(b.callbacks)
            AS c(kind text, type text, queue text, priority int, max_attempts int, timeout_s float8)
    LOOP
        CONTINUE WHEN cb.kind = 'success' AND b.succeeded <> b.total;
        INSERT INTO jobqueue_job (
            queue, type, payload, priority, tenant_id, state, run_at, attempts, max_attempts,
            timeout_s, leased_by, errors, dead_reason, created_at)
        VALUES (
            cb.queue, cb.type,
            jsonb_build_object(
                'batch', jsonb_build_object(
                    'id', b.id, 'total', b.total, 'succeeded', b.succeeded, 'dead', b.dead,
                    'cancelled', b.cancelled, 'completion', b.completions),
                'payload', b.payload),
            cb.priority, '', 'ready', now(), 0, cb.max_attempts, cb.timeout_s, '', '[]'::jsonb,
            '', now())
        RETURNING id INTO new_id;
        UPDATE jobqueue_batch SET
            success_job_id = CASE WHEN cb.kind = 'success' THEN new_id ELSE success_job_id END,
            complete_job_id = CASE WHEN cb.kind = 'complete' THEN new_id ELSE complete_job_id END
        WHERE id = b.id;
    END LOOP;
    RETURN NULL;
END
$$;
CREATE TRIGGER jobqueue_job_batch_member_moved
    AFTER UPDATE OF state ON jobqueue_job
    FOR EACH ROW
    WHEN (NEW.batch_id IS NOT NULL AND OLD.state IS DISTINCT FROM NEW.state
          AND (OLD.state IN {FINISHED} OR NEW.state IN {FINISHED})
          AND (OLD.state <> 'leased' OR NEW.attempts <> OLD.attempts))
    EXECUTE FUNCTION jobqueue_batch_member_moved();
"""

POSTGRES_UNDO = """
DROP TRIGGER IF EXISTS jobqueue_job_batch_member_moved ON jobqueue_job;
DROP FUNCTION IF EXISTS jobqueue_batch_member_moved();
"""

# SQLite: the same transitions and the same callback rows; SQLite writes one transaction at a
# time, so there is no race to order. last_insert_rowid() inside a trigger is the trigger's own
# insert. Times in Django's SQLite text form (UTC).
_FIRES = f"NEW.state IN {FINISHED} AND OLD.state NOT IN {FINISHED}"
_NOW = "strftime('%Y-%m-%d %H:%M:%f', 'now')"


def _sqlite_fire(kind: str, column: str, extra: str) -> str:
    return f"""
    INSERT INTO jobqueue_job (
        queue, type, payload, priority, tenant_id, state, run_at, attempts, max_attempts,
        timeout_s, leased_by, errors, dead_reason, created_at)
    SELECT json_extract(c.value, '$.queue'), json_extract(c.value, '$.type'),
           json_object(
               'batch', json_object(
                   'id', b.id, 'total', b.total, 'succeeded', b.succeeded, 'dead', b.dead,
                   'cancelled', b.cancelled, 'completion', b.completions),
               'payload', json(b.payload)),
           json_extract(c.value, '$.priority'), '', 'ready', {_NOW}, 0,
           json_extract(c.value, '$.max_attempts'), json_extract(c.value, '$.timeout_s'), '',
           '[]', '', {_NOW}
    FROM jobqueue_batch AS b, json_each(b.callbacks) AS c
    WHERE b.id = NEW.batch_id AND {_FIRES} AND b.pending = 0 {extra}
      AND json_extract(c.value, '$.kind') = '{kind}';
    UPDATE jobqueue_batch SET {column} = last_insert_rowid()
    WHERE id = NEW.batch_id AND {_FIRES} AND pending = 0 {extra}
      AND EXISTS (SELECT 1 FROM json_each(callbacks) AS c
                  WHERE json_extract(c.value, '$.kind') = '{kind}');"""


SQLITE_SQL = f"""
CREATE TRIGGER jobqueue_job_batch_member_moved
AFTER UPDATE OF state ON jobqueue_job
FOR EACH ROW WHEN NEW.batch_id IS NOT NULL AND OLD.state IS NOT NEW.state
    AND (OLD.state IN {FINISHED} OR NEW.state IN {FINISHED})
BEGIN
    UPDATE jobqueue_batch SET
        pending = pending + (OLD.state IN {FINISHED}) - (NEW.state IN {FINISHED}),
        succeeded = succeeded + (NEW.state = 'succeeded') - (OLD.state = 'succeeded'),
        dead = dead + (NEW.state = 'dead') - (OLD.state = 'dead'),
        cancelled = cancelled + (NEW.state = 'cancelled') - (OLD.state = 'cancelled'),
        completions = completions + ({_FIRES} AND pending = 1),
        completed_at = CASE WHEN {_FIRES} AND pending = 1 THEN {_NOW}
                            WHEN OLD.state IN {FINISHED} AND NEW.state NOT IN {FINISHED} THEN NULL
                            ELSE completed_at END
    WHERE id = NEW.batch_id;{_sqlite_fire("success", "success_job_id", "AND succeeded = total")}{_sqlite_fire("complete", "complete_job_id", "")}
END;
"""

SQLITE_UNDO = "DROP TRIGGER IF EXISTS jobqueue_job_batch_member_moved;"


def _by_vendor(postgres: str, sqlite: str):
    def run(apps, schema_editor):
        vendor = schema_editor.connection.vendor
        if vendor == "postgresql":
            schema_editor.execute(postgres)
        elif vendor == "sqlite":
            schema_editor.execute(sqlite)

    return run


class Migration(migrations.Migration):

    # CREATE INDEX CONCURRENTLY cannot run inside a transaction.
    atomic = False

    dependencies = [
        ('jobqueue', '0015_parents'),
    ]

    operations = [
        migrations.CreateModel(
            name='Batch',
            fields=[
                ('id', models.BigAutoField(primary_key=True, serialize=False)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('payload', models.JSONField(blank=True, default=dict, help_text='Handed to the callbacks.')),
                ('callbacks', models.JSONField(blank=True, default=list)),
                ('total', models.PositiveIntegerField(default=0, help_text='Members.')),
                ('pending', models.PositiveIntegerField(default=0, help_text='Members not finished.')),
                ('succeeded', models.PositiveIntegerField(default=0)),
                ('dead', models.PositiveIntegerField(default=0)),
                ('cancelled', models.PositiveIntegerField(default=0)),
                ('completions', models.PositiveIntegerField(default=0, help_text='Times pending reached zero (a retried member reopens the batch).')),
                ('completed_at', models.DateTimeField(blank=True, null=True)),
                ('success_job_id', models.BigIntegerField(blank=True, help_text='The on_success callback of the last completion.', null=True)),
                ('complete_job_id', models.BigIntegerField(blank=True, help_text='The on_complete callback of the last completion.', null=True)),
            ],
            options={
                'verbose_name_plural': 'batches',
                'ordering': ['-id'],
            },
        ),
        migrations.AddField(
            model_name='job',
            name='batch_id',
            field=models.BigIntegerField(blank=True, help_text='Its batch, if any.', null=True),
        ),
        AddIndexWithoutBlockingWrites(
            model_name='job',
            index=models.Index(condition=models.Q(('batch_id__isnull', False)), fields=['batch_id', 'state'], name='jobqueue_job_batch'),
        ),
        migrations.RunPython(
            _by_vendor(POSTGRES_SQL, SQLITE_SQL), _by_vendor(POSTGRES_UNDO, SQLITE_UNDO)
        ),
    ]
