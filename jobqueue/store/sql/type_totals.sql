-- type_totals: each job type's recorded runs in rollup minutes [%(start)s, %(end)s), over queues and shards.
-- A range of jobqueue_rollup_key (minute, queue, type, shard); the depth samples (type '') are left out.
SELECT type,
       sum(succeeded)::bigint AS succeeded,
       sum(retried)::bigint AS retried,
       sum(dead)::bigint AS dead,
       sum(cancelled)::bigint AS cancelled,
       sum(run_le_00)::bigint AS run_le_00,
       sum(run_le_01)::bigint AS run_le_01,
       sum(run_le_02)::bigint AS run_le_02,
       sum(run_le_03)::bigint AS run_le_03,
       sum(run_le_04)::bigint AS run_le_04,
       sum(run_le_05)::bigint AS run_le_05,
       sum(run_le_06)::bigint AS run_le_06,
       sum(run_le_07)::bigint AS run_le_07,
       sum(run_le_08)::bigint AS run_le_08,
       sum(run_le_09)::bigint AS run_le_09,
       sum(run_le_10)::bigint AS run_le_10,
       sum(run_le_11)::bigint AS run_le_11,
       sum(run_count)::bigint AS run_count,
       sum(run_sum_s)::float8 AS run_sum_s
FROM jobqueue_rollup
WHERE minute >= %(start)s AND minute < %(end)s AND type <> ''
GROUP BY type
ORDER BY type
