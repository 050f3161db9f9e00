-- enqueue_copy_ids: draw %(n)s job ids for an enqueue_many written by COPY (enqueue_copy.sql), in one round trip.
-- No index: the id sequence only. The ids come back as one array, ascending (one per job, in input order); now_utc is
-- the transaction's now() (UTC, no zone), which the COPY's rows take as created_at and from which their delays count,
-- as enqueue_many.sql's now() does in the same transaction.
SELECT now() AT TIME ZONE 'UTC' AS now_utc,
       array(SELECT nextval((SELECT pg_get_serial_sequence('jobqueue_job', 'id'))::regclass) AS id
             FROM generate_series(1, %(n)s) ORDER BY id) AS ids
