-- limit_transaction: bound the current transaction (lock waits, each statement, idle time between statements).
-- No table; transaction-local (set_config(..., true)): the limits end with the transaction. Values in ms.
-- jq_commit 'off': a worker's own claim, heartbeat or ack may commit asynchronously; NULL keeps the session's.
SELECT set_config('lock_timeout', %(jq_lock_ms)s, true),
       set_config('statement_timeout', %(jq_statement_ms)s, true),
       set_config('idle_in_transaction_session_timeout', %(jq_idle_ms)s, true),
       set_config('synchronous_commit', coalesce(%(jq_commit)s, current_setting('synchronous_commit')), true)
