# Ordering-key enqueues take no lock (issue 33): enqueue_in_order.sql no longer sets the key's last
# job's has_children (an UPDATE, so a row lock held until the caller commits, which blocked that
# job's heartbeat and finish and deadlocked transactions enqueueing keys in opposite orders). The
# trigger of migration 0015 so also fires for a job with an ordering key as it finishes: one
# function call and one index probe of jobqueue_parent_edge per keyed job's end, where a job
# without children and without a key still runs no function. PostgreSQL only; the ORM store
# settles in Python (jobqueue/store/sqlite/flows.py).

from django.db import migrations

WHEN_KEYED = """
DROP TRIGGER IF EXISTS jobqueue_job_settle_children ON jobqueue_job;
CREATE TRIGGER jobqueue_job_settle_children
    AFTER UPDATE OF state ON jobqueue_job
    FOR EACH ROW
    WHEN ((NEW.has_children OR NEW.ordering_key IS NOT NULL) AND OLD.state IS DISTINCT FROM NEW.state
          AND (NEW.state IN ('succeeded', 'dead', 'cancelled') OR OLD.state IN ('dead', 'cancelled')))
    EXECUTE FUNCTION jobqueue_settle_children();
"""

WHEN_FLAGGED = """
DROP TRIGGER IF EXISTS jobqueue_job_settle_children ON jobqueue_job;
CREATE TRIGGER jobqueue_job_settle_children
    AFTER UPDATE OF state ON jobqueue_job
    FOR EACH ROW
    WHEN (NEW.has_children AND OLD.state IS DISTINCT FROM NEW.state
          AND (NEW.state IN ('succeeded', 'dead', 'cancelled') OR OLD.state IN ('dead', 'cancelled')))
    EXECUTE FUNCTION jobqueue_settle_children();
"""


def _postgres_only(sql):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(sql)

    return run


class Migration(migrations.Migration):

    dependencies = [
        ('jobqueue', '0021_waiting_index'),
    ]

    operations = [
        migrations.RunPython(_postgres_only(WHEN_KEYED), _postgres_only(WHEN_FLAGGED)),
    ]
