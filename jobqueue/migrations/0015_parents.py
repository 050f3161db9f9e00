# Jobs that run after other jobs (issue 19, "dependencies": named parents/children here, since
# "dependency" means a breaker-guarded service in this codebase).
#
# Two columns on jobqueue_job with constant database defaults (PostgreSQL 11+ adds them without
# rewriting the table: the ACCESS EXCLUSIVE lock is held for an instant), no index on them, and a
# new table jobqueue_jobparent (one row per edge, indexed both ways). The new state 'waiting' is
# outside every partial index (claim, live dedupe key, ordering key): waiting jobs cost claims nothing.
#
# PostgreSQL only: a row trigger settles a job's children when its state changes, whichever
# statement changed it (finish_many, cancel, reaper, retry, hand-back), in that statement's
# transaction: the last parent to succeed releases the child (waiting -> ready) in its own ack.
# Its WHEN clause is checked in C for each updated row and is false unless the row has children
# (``has_children``, set by the enqueue that named it as a parent), so the finish path of jobs
# nobody waits for runs no function and no extra statement. The ORM store does the same in Python
# (jobqueue/store/sqlite/flows.py); jobqueue/store/interface.py documents the rules.

from django.db import migrations, models

SETTLE_SQL = """
CREATE OR REPLACE FUNCTION jobqueue_settle_children() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    kids bigint[];
    counted_kids bigint[];
    released bigint[];
    woken text[];
BEGIN
    -- Each statement below finds rows by id = ANY(array), so the planner takes the primary key
    -- (a join to a CTE of unknown size could scan the jobs table).
    IF NEW.state IN ('succeeded', 'dead', 'cancelled') THEN
        SELECT array_agg(child_id ORDER BY child_id) INTO kids
        FROM jobqueue_jobparent WHERE parent_id = NEW.id AND NOT counted;
        IF kids IS NULL THEN
            RETURN NULL;
        END IF;
        -- Lock the children in id order: parents finishing at once never wait on each other in
        -- opposite orders. A child's waiting_for is then decremented under its row lock, so of
        -- parents finishing concurrently exactly one sees it reach 0 (no lost or double release).
        PERFORM 1 FROM jobqueue_job WHERE id = ANY(kids) ORDER BY id FOR NO KEY UPDATE;
        -- Count this parent off: a success always, a failure where the child runs anyway.
        WITH edges AS (
            UPDATE jobqueue_jobparent SET counted = true
            WHERE parent_id = NEW.id AND NOT counted
              AND (NEW.state = 'succeeded' OR run_on_parent_failure)
            RETURNING child_id
        )
        SELECT array_agg(child_id) INTO counted_kids FROM edges;
        IF counted_kids IS NOT NULL THEN
            -- A child not waiting (cancelled for another parent) is counted too: retried, it
            -- waits only for the parents still uncounted.
            WITH moved AS (
                UPDATE jobqueue_job AS c
                SET waiting_for = c.waiting_for - 1,
                    run_at = CASE WHEN c.state = 'waiting' AND c.waiting_for <= 1
                                  THEN greatest(c.run_at, now()) ELSE c.run_at END,
                    state = CASE WHEN c.state = 'waiting' AND c.waiting_for <= 1
                                 THEN CASE WHEN c.run_at > now() THEN 'scheduled' ELSE 'ready' END
                                 ELSE c.state END
                WHERE c.id = ANY(counted_kids)
                RETURNING c.id, c.state, c.waiting_for, c.queue
            )
            SELECT array_agg(id), array_agg(DISTINCT queue) FILTER (WHERE state = 'ready')
            INTO released, woken
            FROM moved WHERE waiting_for = 0 AND state IN ('ready', 'scheduled');
        END IF;
        IF released IS NOT NULL THEN
            -- A new statement, so a new snapshot: it sees every other parent's committed result.
            UPDATE jobqueue_job AS c
            SET payload = c.payload || jsonb_build_object('parent_results', (
                SELECT coalesce(jsonb_agg(p.result ORDER BY l.id), '[]'::jsonb)
                FROM jobqueue_jobparent AS l LEFT JOIN jobqueue_job AS p ON p.id = l.parent_id
                WHERE l.child_id = c.id))
            WHERE c.id = ANY(released) AND EXISTS (
                SELECT 1 FROM jobqueue_jobparent AS t WHERE t.child_id = c.id AND t.takes_parent_results);
            -- The queues from the UPDATE itself: a look-up by state would walk the claim index.
            PERFORM pg_notify('jobqueue_ready', q) FROM unnest(woken) AS q;
        END IF;
        IF NEW.state <> 'succeeded' THEN
            -- Cancelling a child with children fires this trigger on it: the cancel is transitive.
            UPDATE jobqueue_job AS c
            SET state = 'cancelled', finished_at = now(),
                errors = c.errors || jsonb_build_array(jsonb_build_object(
                    'kind', 'parent_failed', 'at', now(), 'parent', NEW.id, 'parent_state', NEW.state,
                    'previous_state', c.state,
                    'message', 'parent job #' || NEW.id || ' ended ' || NEW.state))
            WHERE c.id = ANY(kids) AND c.state = 'waiting' AND EXISTS (
                SELECT 1 FROM jobqueue_jobparent AS l
                WHERE l.parent_id = NEW.id AND l.child_id = c.id
                  AND NOT l.counted AND NOT l.run_on_parent_failure);
        END IF;
    ELSIF OLD.state IN ('dead', 'cancelled') THEN
        -- An operator retry: the children its failure cancelled wait again (unless another of
        -- their parents is still dead or cancelled). Transitive, as the cancel was.
        SELECT array_agg(child_id ORDER BY child_id) INTO kids
        FROM jobqueue_jobparent
        WHERE parent_id = NEW.id AND NOT counted AND NOT run_on_parent_failure;
        IF kids IS NULL THEN
            RETURN NULL;
        END IF;
        UPDATE jobqueue_job AS c
        SET state = 'waiting', finished_at = NULL,
            errors = c.errors || jsonb_build_array(jsonb_build_object(
                'kind', 'parent_retried', 'at', now(), 'parent', NEW.id, 'previous_state', c.state,
                'message', 'parent job #' || NEW.id || ' was retried; waiting again'))
        WHERE c.id = ANY(kids) AND c.state = 'cancelled'
          AND c.errors -> -1 ->> 'kind' = 'parent_failed'
          AND NOT EXISTS (
              SELECT 1 FROM jobqueue_jobparent AS o JOIN jobqueue_job AS p ON p.id = o.parent_id
              WHERE o.child_id = c.id AND o.parent_id <> NEW.id AND NOT o.counted
                AND NOT o.run_on_parent_failure AND p.state IN ('dead', 'cancelled'));
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER jobqueue_job_settle_children
    AFTER UPDATE OF state ON jobqueue_job
    FOR EACH ROW
    WHEN (NEW.has_children AND OLD.state IS DISTINCT FROM NEW.state
          AND (NEW.state IN ('succeeded', 'dead', 'cancelled') OR OLD.state IN ('dead', 'cancelled')))
    EXECUTE FUNCTION jobqueue_settle_children();
"""

UNSETTLE_SQL = """
DROP TRIGGER IF EXISTS jobqueue_job_settle_children ON jobqueue_job;
DROP FUNCTION IF EXISTS jobqueue_settle_children();
"""


def _postgres_only(sql):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(sql)

    return run


class Migration(migrations.Migration):

    dependencies = [
        ('jobqueue', '0014_rollup'),
    ]

    operations = [
        migrations.AddField(
            model_name='job',
            name='has_children',
            field=models.BooleanField(db_default=False, default=False, help_text='Other jobs wait for this one.'),
        ),
        migrations.AddField(
            model_name='job',
            name='waiting_for',
            field=models.IntegerField(db_default=0, default=0, help_text='Parents that have not succeeded yet.'),
        ),
        migrations.AlterField(
            model_name='job',
            name='state',
            field=models.CharField(choices=[('ready', 'ready'), ('scheduled', 'scheduled'), ('leased', 'leased'), ('succeeded', 'succeeded'), ('dead', 'dead'), ('cancelled', 'cancelled'), ('waiting', 'waiting')], default='ready', max_length=16),
        ),
        migrations.CreateModel(
            name='JobParent',
            fields=[
                ('id', models.BigAutoField(primary_key=True, serialize=False)),
                ('parent_id', models.BigIntegerField()),
                ('child_id', models.BigIntegerField()),
                ('counted', models.BooleanField(default=False, help_text="The parent's outcome was taken off the child's waiting_for.")),
                ('run_on_parent_failure', models.BooleanField(default=False, help_text='The child runs even if this parent ends dead or cancelled.')),
                ('takes_parent_results', models.BooleanField(default=False, help_text="The child gets its parents' results as parent_results.")),
            ],
            options={
                'verbose_name': 'job parent',
                'indexes': [models.Index(fields=['child_id', 'parent_id'], name='jobqueue_parent_child')],
                'constraints': [models.UniqueConstraint(fields=('parent_id', 'child_id'), name='jobqueue_parent_edge')],
            },
        ),
        migrations.RunPython(_postgres_only(SETTLE_SQL), _postgres_only(UNSETTLE_SQL)),
    ]
