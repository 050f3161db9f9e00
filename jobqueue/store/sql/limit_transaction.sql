-- limit_transaction: bound the current transaction (lock waits, each statement, idle time between statements).
-- No table; transaction-local (set_config(..., true)): the limits end with the transaction. Values in ms.
-- JIT off: jobqueue's statements are short, and the planner's estimate of a LIMIT taken from a
-- row (the claim's lane allotments) could otherwise switch on compilation costing seconds.
SELECT set_config('lock_timeout', %(jq_lock_ms)s, true),
       set_config('statement_timeout', %(jq_statement_ms)s, true),
       set_config('idle_in_transaction_session_timeout', %(jq_idle_ms)s, true),
       set_config('jit', 'off', true)
