-- limit_transaction: bound the current transaction (lock waits, each statement, idle time between statements),
-- and, for a worker's own claim, heartbeat or ack, commit asynchronously (synchronous_commit off: bounded.py).
-- JIT is off in all of them (bounded.py): the claim's lane allotments are LIMITs taken from a row.
-- No table; transaction-local (set_config(..., true)): the settings end with the transaction. Durations in ms.
-- Names and values as two arrays: one short text whatever is set (it goes in front of the claim, whose whole
-- query string must fit psycopg's 4,096-character cache of parsed placeholders: sqltext.py).
SELECT set_config(l.name, l.value, true) FROM unnest(%(jq_names)s::text[], %(jq_values)s::text[]) AS l(name, value)
