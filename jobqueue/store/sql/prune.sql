-- prune: delete up to %(limit)s jobs of the given finished states that finished before now() - older_than, oldest first.
-- Uses the partial index jobqueue_job_finished (state, finished_at) per state, then the primary key; SKIP LOCKED lets several pruners share the work.
-- Why this shape: with most rows expired, "WHERE id IN (SELECT ... LIMIT n)" planned as a Seq Scan
-- of the table twice (field case 31). One state at a time (LATERAL), ordered by finished_at, keeps
-- the batch on the index; = ANY(ARRAY(...)) deletes by primary key. The literal state list repeats
-- the index predicate, so the planner can use the partial index whatever %(states)s holds.
DELETE FROM jobqueue_job
WHERE id = ANY(ARRAY(
    SELECT batch.id
    FROM unnest(%(states)s::text[]) AS s(state)
    CROSS JOIN LATERAL (
        SELECT id
        FROM jobqueue_job
        WHERE state = s.state
          AND state IN ('succeeded', 'dead', 'cancelled')
          AND finished_at < coalesce(%(now)s::timestamptz, now()) - make_interval(secs => %(older_than_s)s::float8)
        ORDER BY finished_at
        LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED
    ) AS batch
    LIMIT %(limit)s
))
