-- claim_turn: wait for this database's turn to make a tenant-capped claim; held until commit.
-- The key is an arbitrary constant ("jobq" claim) in the application-defined advisory lock space.
SELECT pg_advisory_xact_lock(7002341135661924609)
