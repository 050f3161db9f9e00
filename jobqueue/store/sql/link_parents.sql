-- link_parents: one jobqueue_jobparent row per parent of a job just enqueued after them (counted: already done).
-- Inserts only; the unique index jobqueue_parent_edge (parent_id, child_id) is how a finishing parent finds them.
INSERT INTO jobqueue_jobparent (parent_id, child_id, counted, run_on_parent_failure, takes_parent_results)
SELECT e.parent_id, %(child)s, e.counted, %(run_on_parent_failure)s, %(takes_parent_results)s
FROM unnest(%(parents)s::bigint[], %(counted)s::bool[]) AS e(parent_id, counted)
