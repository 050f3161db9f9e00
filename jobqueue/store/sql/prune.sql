-- prune: delete up to %(limit)s jobs of the given finished states that finished before now() - older_than, oldest first,
-- with the parent links (jobqueue_jobparent) whose child they are; return how many jobs and links went, and the
-- batches the jobs were members of (prune_batches.sql then deletes those left done and empty).
-- Uses the partial index jobqueue_job_finished (state, finished_at) per state, then the primary key; SKIP LOCKED lets several pruners share the work.
-- Why this shape: with most rows expired, "WHERE id IN (SELECT ... LIMIT n)" planned as a Seq Scan
-- of the table twice (field case 31). One state at a time (LATERAL), ordered by finished_at, keeps
-- the batch on the index; = ANY(ARRAY(...)) deletes by primary key. The literal state list repeats
-- the index predicate, so the planner can use the partial index whatever %(states)s holds.
-- Links go with their child (jobqueue_parent_child index, at most MAX_PARENTS per child), not with their parent:
-- a waiting child released later reads its parents' results through its links, in the order of after=[...]
-- (a pruned parent's result reads null there; a deleted link would shift the others).
WITH gone AS (
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
    RETURNING id, batch_id
),
links AS (
    DELETE FROM jobqueue_jobparent
    WHERE child_id = ANY(ARRAY(SELECT id FROM gone))
    RETURNING 1
)
SELECT (SELECT count(*) FROM gone) AS jobs,
       (SELECT count(*) FROM links) AS links,
       ARRAY(SELECT DISTINCT batch_id FROM gone WHERE batch_id IS NOT NULL ORDER BY batch_id) AS batches
