-- routine_exists: whether this version's claim function is installed (store/postgres/routines.py).
SELECT to_regproc(%(name)s) IS NOT NULL
