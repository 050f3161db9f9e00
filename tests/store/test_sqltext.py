"""The statements the PostgreSQL store sends: compacted, and short enough for psycopg's caches."""

from __future__ import annotations

from importlib import resources

from psycopg import _queries

from jobqueue.store import bounded
from jobqueue.store.sqltext import compact, sql


def test_compact_drops_comments_and_spacing_but_keeps_quoted_text():
    text = "SELECT  'a -- b',\n  \"x  y\"  -- why\n\tFROM t -- end"
    assert compact(text) == "SELECT 'a -- b', \"x  y\" FROM t"


def test_every_statement_keeps_its_words():
    folder = resources.files("jobqueue.store.sql")
    for entry in folder.iterdir():
        if not entry.name.endswith(".sql"):
            continue
        text = sql(entry.name.removesuffix(".sql"))
        assert "--" not in text and "\n" not in text, entry.name
        words = [
            word for line in entry.read_text().splitlines() for word in line.split("--")[0].split()
        ]
        assert text.split() == words, entry.name


def test_the_hot_statements_fit_psycopgs_query_cache():
    """psycopg parses a query's placeholders once only for texts of at most 4,096 characters:
    the claim and the heartbeat, as sent (the transaction limits in front), must fit, or each is
    parsed afresh.

    ``finish_many`` carries the per-minute rollup's upsert (24 histogram columns) and does not
    fit: its parse costs about 23 µs per call, measured (``_query2pg_client_nocache``, 2,000
    calls), once per completer pass of up to a batch of outcomes, not per job. It is held to
    8,000 characters so that it cannot grow unnoticed (docs/decisions.md, "finish_many and
    psycopg's query cache"; 6,000 until the batches' bookkeeping added ~1,700, "Batches").
    """
    limit = _queries.MAX_CACHED_STATEMENT_LENGTH
    prefix = len(bounded._limit_sql()) + 2
    assert prefix + len(sql("heartbeat").encode()) <= limit
    # The claim in two levels does not fit (docs/decisions.md, "The claim in two levels"): its
    # parse costs about 30 µs a claim, measured as finish_many's was, against a server's
    # planning and run of a millisecond or more. Held to 7,500 characters without rate limits
    # and 11,000 with them, so that it cannot grow unnoticed; 9,500 and 13,500 since the lane
    # window (about 1,300 more: the scan's wrap and the session's place in it), the bound on a
    # lane's tags (400) and the row that says a bucket held jobs back (400). It is sent only
    # where the server-side function is missing (store/postgres/routines.py).
    assert prefix + len(sql("claim~rates").encode()) <= 9500
    assert prefix + len(sql("claim").encode()) <= 13500
    # finish_many also moves batch counts and enqueues batch callbacks (issue 19).
    assert prefix + len(sql("finish_many").encode()) <= 8000
