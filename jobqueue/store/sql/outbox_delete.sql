-- outbox_delete: delete the outbox rows the relay has inserted on the queue database (and committed there).
-- Primary key jobqueue_outbox_pkey; the rows are the relay's, locked by outbox_take.sql in this transaction.
DELETE FROM jobqueue_outbox WHERE id = ANY(%(ids)s::bigint[])
