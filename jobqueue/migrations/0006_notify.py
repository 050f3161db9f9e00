"""PostgreSQL only: wake idle workers at commit, and tune the jobs table for its churn.

1. A statement-level AFTER INSERT trigger sends one ``pg_notify('jobqueue_ready', <queue>)`` per
   distinct queue that got ready jobs in the statement, and one ``'<queue> <seconds>'`` per queue
   that got delayed jobs due within the hour (when the earliest is due). The notification
   carries the queue name only, never the payload (NOTIFY has an 8,000-byte limit, and payloads
   may be private).
   PostgreSQL delivers it at commit, so a worker never wakes for a row it cannot see yet, and
   it folds identical notifications of one transaction into one.
2. Storage parameters for a table where every row is inserted, updated two or three times and
   deleted within minutes: free space on each page for the new row versions (fillfactor), and
   autovacuum/autoanalyze after 1-2 % of the table changed instead of 20 % (the default would
   let dead tuples pile up for hours on a table of millions of rows).

Other databases get nothing: they poll (``POLL_INTERVAL_SECONDS``).
"""

from django.db import migrations

#: The channel workers LISTEN on; the payload is the queue name. Keep in sync with
#: ``jobqueue.store.interface.NOTIFY_CHANNEL``.
CHANNEL = "jobqueue_ready"

NOTIFY_SQL = f"""
CREATE OR REPLACE FUNCTION jobqueue_notify_ready() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- One notification per queue per statement for rows claimable now: payload '<queue>'.
    PERFORM pg_notify('{CHANNEL}', q.queue)
    FROM (SELECT DISTINCT queue FROM jobqueue_new_jobs WHERE state = 'ready') AS q;
    -- Delayed jobs due within the hour: payload '<queue> <seconds>', when the earliest of them
    -- is due, counted from now, so an idle worker can wake then instead of at its next poll.
    PERFORM pg_notify('{CHANNEL}', s.queue || ' ' || to_char(
        greatest(extract(epoch FROM s.run_at - clock_timestamp()), 0), 'FM9999990.000'))
    FROM (
        SELECT queue, min(run_at) AS run_at FROM jobqueue_new_jobs
        WHERE state = 'scheduled' AND run_at < now() + interval '1 hour'
        GROUP BY queue
    ) AS s;
    RETURN NULL;
END
$$;
CREATE TRIGGER jobqueue_job_notify_ready
    AFTER INSERT ON jobqueue_job
    REFERENCING NEW TABLE AS jobqueue_new_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION jobqueue_notify_ready();
"""

UNNOTIFY_SQL = """
DROP TRIGGER IF EXISTS jobqueue_job_notify_ready ON jobqueue_job;
DROP FUNCTION IF EXISTS jobqueue_notify_ready();
"""

# fillfactor 80: a claim, heartbeat or ack writes a new row version; room on the same page keeps
# it there (fewer pages touched, and HOT for updates that change no indexed column).
# Vacuum after 1 % dead rows (+1,000), analyze after 2 % changed: the claim's plan depends on
# fresh statistics of a table whose live part is small and moves fast.
STORAGE_SQL = """
ALTER TABLE jobqueue_job SET (
    fillfactor = 80,
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_insert_scale_factor = 0.02,
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_analyze_threshold = 1000
);
"""

UNSTORAGE_SQL = """
ALTER TABLE jobqueue_job RESET (
    fillfactor,
    autovacuum_vacuum_scale_factor,
    autovacuum_vacuum_threshold,
    autovacuum_vacuum_insert_scale_factor,
    autovacuum_analyze_scale_factor,
    autovacuum_analyze_threshold
);
"""


def _postgres_only(sql):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(sql)

    return run


class Migration(migrations.Migration):

    dependencies = [
        ("jobqueue", "0005_fairness"),
    ]

    operations = [
        migrations.RunPython(_postgres_only(NOTIFY_SQL), _postgres_only(UNNOTIFY_SQL)),
        migrations.RunPython(_postgres_only(STORAGE_SQL), _postgres_only(UNSTORAGE_SQL)),
    ]
