-- count_prunable: per finished state, how many jobs prune.sql would delete now (finished more
-- than that state's older_than_s ago), counted up to %(cap)s each (NULL: exactly, for
-- prunejobs --dry-run; a number: the metrics' bounded count). Nothing is locked or changed.
--
-- One state at a time (unnest + LATERAL), each a range of the partial index
-- jobqueue_job_finished (state, finished_at) read in its own order: with most of the table past
-- retention, a plain count(*) over all states planned as a sequential scan of the whole table;
-- ordered as the index is, reading the index is the cheaper plan (a scan would have to sort).
SELECT s.state, c.n AS prunable
FROM unnest(%(states)s::text[], %(older_than_s)s::float8[]) AS s(state, older_than_s)
CROSS JOIN LATERAL (
    SELECT count(*) AS n
    FROM (
        SELECT j.finished_at
        FROM jobqueue_job AS j
        WHERE j.state = s.state
          AND j.state IN ('succeeded', 'dead', 'cancelled')
          AND j.finished_at < coalesce(%(now)s::timestamptz, now())
                              - make_interval(secs => s.older_than_s)
        ORDER BY j.finished_at
        LIMIT %(cap)s
    ) AS r
) AS c
ORDER BY s.state
