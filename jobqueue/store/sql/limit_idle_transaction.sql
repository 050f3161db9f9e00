-- limit_idle_transaction: abort this transaction if the client leaves it idle longer than ms (a paused or cut-off leader), releasing its locks.
-- No table; transaction-local (set_config(..., true)).
SELECT set_config('idle_in_transaction_session_timeout', %(ms)s, true)
