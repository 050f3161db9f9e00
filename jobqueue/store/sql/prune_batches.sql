-- prune_batches: delete the batches among %(ids)s (those of the jobs a prune just deleted) that are done
-- (pending 0, completed at least once) and have no member left. Run after that prune committed, in its own
-- statement: of two pruners deleting a batch's last members at once, the one that commits second sees both
-- gone. The member check walks jobqueue_job_batch (batch_id, state); the callbacks carry their counts in their
-- own payload and never read this row.
DELETE FROM jobqueue_batch AS b
WHERE b.id = ANY(%(ids)s::bigint[])
  AND b.pending = 0
  AND b.completions > 0
  AND NOT EXISTS (SELECT 1 FROM jobqueue_job AS j WHERE j.batch_id = b.id)
