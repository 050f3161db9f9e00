-- finish_many: record the outcomes of many runs (succeeded, scheduled or dead, in any mix) in one statement:
-- the worker's, jobqueue.ack/nack's, the reaper's, and a dead process's charged job (store/finishing.py).
-- Fenced per row on (id, lease_token, state = 'leased'); primary-key lookups. A lease no longer held matches nothing.
-- The state is tested through coalesce() (state is NOT NULL: the same test) so that no index on it can serve the
-- fence: as a plain equality the planner chose a bitmap scan of jobqueue_job_running (leased rows, few by the
-- statistics) hashed against the outcomes, and that index holds an entry for every claim until a vacuum (a bitmap
-- scan never marks them dead): 3.1 ms of a 3.8 ms ack of 25 in a 20,000-job drain (docs/performance.md, drain2).
-- A job whose cancel was requested while it ran ends cancelled (an ack's result kept, and an entry saying so).
-- clock.at is now() unless a test stands in for the database clock.
-- The same statement adds the recorded rows to the per-minute rollup (jobqueue/models/rollups.py): one upsert row
-- per (minute, queue, type) of this batch, in this connection's shard (backend pid mod ROLLUP_SHARDS:
-- concurrent batches are on different backends, so mostly on different rows instead of queueing on one hot row
-- lock), on its unique key, in key order (two batches that share a shard lock its rows in the same order).
-- expired counts the reaper's outcomes (error kind 'lease_expired', EXPIRED_KIND: the lease ran out).
-- due_at is run_at before this update (a retry overwrites it): the subquery reads the statement's
-- snapshot, which does not see the statement's own changes (a self-join in FROM did the same but planned ~10x
-- slower, every indexed path of jobqueue_job weighed twice). Pickup latency is started_at - due_at, run duration
-- clock.at - started_at, in float8 (date_part: extract's numeric made the aggregate 2x slower). Histogram columns
-- are cumulative (le) counts.
-- Batches (jobqueue/flows/batches.py, migration 0016_batches): the members this statement finished are counted per batch
-- in one update of each batch row (not one per member: a 10,000-member batch acked 100 at a time is 100 updates of
-- its row), the rows locked first in id order (two statements touching the same batches never deadlock); the
-- update that brings pending to zero draws the callbacks' ids and inserts them, so the callback commits with the
-- last outcome and only the statement that saw zero under the row lock fires it. No member here: empty CTEs
-- (or none at all: the "batches" section below).
-- The batch trigger of migration 0016 leaves these transitions (leased to finished, attempts unchanged) to us.
WITH done AS (
UPDATE jobqueue_job AS j
SET state = CASE WHEN j.cancel_requested_at IS NOT NULL THEN 'cancelled' ELSE o.state END,
    result = CASE WHEN o.state = 'succeeded' THEN o.result ELSE j.result END,
    dead_reason = CASE WHEN o.state = 'dead' AND j.cancel_requested_at IS NULL
                       THEN coalesce(o.dead_reason, '') ELSE '' END,
    run_at = CASE WHEN o.state = 'scheduled' AND j.cancel_requested_at IS NULL
                  THEN coalesce(o.retry_at, clock.at + make_interval(secs => o.delay_s))
                  ELSE j.run_at END,
    finished_at = CASE WHEN o.state = 'scheduled' AND j.cancel_requested_at IS NULL
                       THEN NULL ELSE clock.at END,
    errors = j.errors || CASE
        WHEN o.error IS NOT NULL THEN jsonb_build_array(o.error || jsonb_build_object('at', clock.at))
        WHEN j.cancel_requested_at IS NOT NULL THEN jsonb_build_array(jsonb_build_object(
            'kind', 'cancelled', 'attempt', j.attempts, 'at', clock.at, 'worker', j.leased_by,
            'message', 'cancel requested while running; the handler completed anyway'))
        ELSE '[]'::jsonb END,
    lease_token = NULL, lease_until = NULL
FROM unnest(%(ids)s::bigint[], %(tokens)s::uuid[], %(states)s::text[], %(results)s::jsonb[],
            %(errors)s::jsonb[], %(dead_reasons)s::text[], %(retry_ats)s::timestamptz[],
            %(delays)s::float8[])
         AS o(id, token, state, result, error, dead_reason, retry_at, delay_s),
     (SELECT coalesce(%(now)s::timestamptz, now()) AS at) AS clock
WHERE j.id = o.id AND j.lease_token = o.token AND coalesce(j.state, '') = 'leased'
RETURNING j.id, j.state, j.queue, j.type, j.started_at, clock.at, o.error ->> 'kind' AS kind, j.batch_id,
          (SELECT w.run_at FROM jobqueue_job AS w WHERE w.id = j.id) AS due_at
), observed AS MATERIALIZED (
    -- MATERIALIZED: pickup_s and run_s computed once per row. Inlined, each of the 28 aggregates
    -- below repeated their expression (0.07 ms planning, 0.05 ms execution of 25 rows;
    -- docs/performance.md, branch sql).
    SELECT date_trunc('minute', at) AS minute, queue, type, state, kind,
           greatest(date_part('epoch', started_at - due_at), 0) AS pickup_s,
           greatest(date_part('epoch', at - started_at), 0) AS run_s
    FROM done
), rolled AS (
INSERT INTO jobqueue_rollup AS r (
    minute, queue, type, shard, succeeded, retried, dead, cancelled, expired,
    pickup_count, pickup_sum_s, run_count, run_sum_s,
    pickup_le_00, pickup_le_01, pickup_le_02, pickup_le_03,
    pickup_le_04, pickup_le_05, pickup_le_06, pickup_le_07,
    pickup_le_08, pickup_le_09, pickup_le_10, pickup_le_11,
    run_le_00, run_le_01, run_le_02, run_le_03,
    run_le_04, run_le_05, run_le_06, run_le_07,
    run_le_08, run_le_09, run_le_10, run_le_11)
SELECT minute, queue, type, mod(pg_backend_pid(), %(shards)s),
    count(*) FILTER (WHERE state = 'succeeded'), count(*) FILTER (WHERE state = 'scheduled'),
    count(*) FILTER (WHERE state = 'dead'), count(*) FILTER (WHERE state = 'cancelled'),
    count(*) FILTER (WHERE kind = %(expired_kind)s),
    count(pickup_s), coalesce(sum(pickup_s), 0), count(run_s), coalesce(sum(run_s), 0),
    count(*) FILTER (WHERE pickup_s <= 0.01), count(*) FILTER (WHERE pickup_s <= 0.05),
    count(*) FILTER (WHERE pickup_s <= 0.1), count(*) FILTER (WHERE pickup_s <= 0.25),
    count(*) FILTER (WHERE pickup_s <= 0.5), count(*) FILTER (WHERE pickup_s <= 1.0),
    count(*) FILTER (WHERE pickup_s <= 2.5), count(*) FILTER (WHERE pickup_s <= 5.0),
    count(*) FILTER (WHERE pickup_s <= 10.0), count(*) FILTER (WHERE pickup_s <= 30.0),
    count(*) FILTER (WHERE pickup_s <= 60.0), count(*) FILTER (WHERE pickup_s <= 300.0),
    count(*) FILTER (WHERE run_s <= 0.01), count(*) FILTER (WHERE run_s <= 0.05),
    count(*) FILTER (WHERE run_s <= 0.1), count(*) FILTER (WHERE run_s <= 0.25),
    count(*) FILTER (WHERE run_s <= 0.5), count(*) FILTER (WHERE run_s <= 1.0),
    count(*) FILTER (WHERE run_s <= 2.5), count(*) FILTER (WHERE run_s <= 5.0),
    count(*) FILTER (WHERE run_s <= 10.0), count(*) FILTER (WHERE run_s <= 30.0),
    count(*) FILTER (WHERE run_s <= 60.0), count(*) FILTER (WHERE run_s <= 300.0)
FROM observed
GROUP BY minute, queue, type
ORDER BY minute, queue, type
ON CONFLICT (minute, queue, type, shard) DO UPDATE SET
    succeeded = r.succeeded + excluded.succeeded, retried = r.retried + excluded.retried,
    dead = r.dead + excluded.dead, cancelled = r.cancelled + excluded.cancelled,
    expired = r.expired + excluded.expired,
    pickup_count = r.pickup_count + excluded.pickup_count,
    pickup_sum_s = r.pickup_sum_s + excluded.pickup_sum_s,
    run_count = r.run_count + excluded.run_count, run_sum_s = r.run_sum_s + excluded.run_sum_s,
    pickup_le_00 = r.pickup_le_00 + excluded.pickup_le_00, pickup_le_01 = r.pickup_le_01 + excluded.pickup_le_01,
    pickup_le_02 = r.pickup_le_02 + excluded.pickup_le_02, pickup_le_03 = r.pickup_le_03 + excluded.pickup_le_03,
    pickup_le_04 = r.pickup_le_04 + excluded.pickup_le_04, pickup_le_05 = r.pickup_le_05 + excluded.pickup_le_05,
    pickup_le_06 = r.pickup_le_06 + excluded.pickup_le_06, pickup_le_07 = r.pickup_le_07 + excluded.pickup_le_07,
    pickup_le_08 = r.pickup_le_08 + excluded.pickup_le_08, pickup_le_09 = r.pickup_le_09 + excluded.pickup_le_09,
    pickup_le_10 = r.pickup_le_10 + excluded.pickup_le_10, pickup_le_11 = r.pickup_le_11 + excluded.pickup_le_11,
    run_le_00 = r.run_le_00 + excluded.run_le_00, run_le_01 = r.run_le_01 + excluded.run_le_01,
    run_le_02 = r.run_le_02 + excluded.run_le_02, run_le_03 = r.run_le_03 + excluded.run_le_03,
    run_le_04 = r.run_le_04 + excluded.run_le_04, run_le_05 = r.run_le_05 + excluded.run_le_05,
    run_le_06 = r.run_le_06 + excluded.run_le_06, run_le_07 = r.run_le_07 + excluded.run_le_07,
    run_le_08 = r.run_le_08 + excluded.run_le_08, run_le_09 = r.run_le_09 + excluded.run_le_09,
    run_le_10 = r.run_le_10 + excluded.run_le_10, run_le_11 = r.run_le_11 + excluded.run_le_11
)
-- batches{
-- Sent only when an outcome may be a batch member: the store leaves these lines out when it
-- claimed every job of the outcomes itself and none had a batch_id (store/postgres/finishing.py;
-- a job's batch_id is written in the transaction that inserts it and never changes). Planned for
-- jobs without a batch they cost ~0.16 ms of planning, and their INSERT ran the statement-level
-- NOTIFY trigger of migration 0006 every time (docs/performance.md, branch sql).
, members AS (
    SELECT batch_id, count(*) AS n, count(*) FILTER (WHERE state = 'succeeded') AS succeeded,
           count(*) FILTER (WHERE state = 'dead') AS dead,
           count(*) FILTER (WHERE state = 'cancelled') AS cancelled, min(at) AS at
    FROM done
    WHERE batch_id IS NOT NULL AND state IN ('succeeded', 'dead', 'cancelled')
    GROUP BY batch_id
), batch_locks AS MATERIALIZED (
    SELECT count(*) AS n
    FROM (SELECT b.id FROM jobqueue_batch AS b WHERE b.id IN (SELECT batch_id FROM members)
          ORDER BY b.id FOR NO KEY UPDATE) AS l
), counted AS (
    UPDATE jobqueue_batch AS b
    SET pending = b.pending - m.n, succeeded = b.succeeded + m.succeeded, dead = b.dead + m.dead,
        cancelled = b.cancelled + m.cancelled,
        completions = b.completions + (b.pending = m.n)::int,
        completed_at = CASE WHEN b.pending = m.n THEN m.at ELSE b.completed_at END,
        success_job_id = CASE
            WHEN b.pending = m.n AND b.succeeded + m.succeeded = b.total
                 AND b.callbacks @> '[{"kind": "success"}]'
            THEN nextval(pg_get_serial_sequence('jobqueue_job', 'id')) ELSE b.success_job_id END,
        complete_job_id = CASE
            WHEN b.pending = m.n AND b.callbacks @> '[{"kind": "complete"}]'
            THEN nextval(pg_get_serial_sequence('jobqueue_job', 'id')) ELSE b.complete_job_id END
    FROM members AS m, batch_locks AS l
    WHERE b.id = m.batch_id AND l.n >= 0
    RETURNING b.*, m.at
), fired AS (
INSERT INTO jobqueue_job (
    id, queue, type, payload, priority, tenant_id, state, run_at, attempts, max_attempts,
    timeout_s, leased_by, errors, dead_reason, created_at)
SELECT CASE cb.kind WHEN 'success' THEN c.success_job_id ELSE c.complete_job_id END,
       cb.queue, cb.type,
       jsonb_build_object(
           'batch', jsonb_build_object(
               'id', c.id, 'total', c.total, 'succeeded', c.succeeded, 'dead', c.dead,
               'cancelled', c.cancelled, 'completion', c.completions),
           'payload', c.payload),
       cb.priority, '', 'ready', c.at, 0, cb.max_attempts, cb.timeout_s, '', '[]'::jsonb, '', c.at
FROM counted AS c
CROSS JOIN LATERAL jsonb_to_recordset(c.callbacks)
    AS cb(kind text, type text, queue text, priority int, max_attempts int, timeout_s float8)
WHERE c.pending = 0 AND (cb.kind = 'complete' OR c.succeeded = c.total)
)
-- }batches
SELECT id, state FROM done
