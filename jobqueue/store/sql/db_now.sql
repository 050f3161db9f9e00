-- db_now: the database clock, for the scheduler and "run now" (fire times are database time).
-- No table.
SELECT now()
