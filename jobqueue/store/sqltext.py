"""Internal: the text of the statements in ``store/sql/``, read once and compacted.

The files keep their comments (they say why each statement is shaped as it is); what is sent
leaves them out. That matters for more than bytes on the wire: psycopg caches the parse of a
query's ``%(name)s`` placeholders only for query texts of at most 4,096 characters
(``psycopg._queries.MAX_CACHED_STATEMENT_LENGTH``), and the claim with its comments and the
transaction limits in front of it is about 6,800, so every claim was parsed afresh.
"""

from __future__ import annotations

import functools
from importlib import resources

__all__ = ["compact", "sql", "without"]


def compact(text: str) -> str:
    """Return ``text`` without ``--`` comments, each run of whitespace one space, stripped.

    Quoted text (``'...'`` literals and ``"..."`` identifiers) is kept as it is.

    Args:
        text: SQL text; no dollar-quoted bodies or ``/* */`` comments (none of ours has them).

    Returns:
        The same statement(s), shorter.
    """
    out: list[str] = []
    i, n = 0, len(text)
    space = False
    while i < n:
        ch = text[i]
        if ch in "'\"":
            end = i + 1
            while end < n and text[end] != ch:
                end += 1
            if space and out:
                out.append(" ")
            space = False
            out.append(text[i : end + 1])
            i = end + 1
        elif ch == "-" and text.startswith("--", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
            space = True
        elif ch.isspace():
            space = True
            i += 1
        else:
            if space and out:
                out.append(" ")
            space = False
            out.append(ch)
            i += 1
    return "".join(out)


def without(text: str, section: str) -> str:
    """Return ``text`` without its ``-- <section>{`` ... ``-- }<section>`` lines (both included).

    One file can so hold a statement and its larger variant: ``claim.sql``'s rate limits are
    sent only when some limit is declared, and the claim without them stays within psycopg's
    query cache.
    """
    kept, skipping = [], False
    for line in text.splitlines():
        mark = line.strip()
        if mark == f"-- {section}{{":
            skipping = True
        elif mark == f"-- }}{section}":
            skipping = False
        elif not skipping:
            kept.append(line)
    return "\n".join(kept)


@functools.cache
def sql(name: str) -> str:
    """Return the compacted text of ``store/sql/<name>.sql`` (read once).

    ``"claim~rates"`` is ``claim.sql`` without its ``rates`` sections (:func:`without`).
    """
    file, _, drop = name.partition("~")
    text = resources.files("jobqueue.store.sql").joinpath(f"{file}.sql").read_text()
    return compact(without(text, drop) if drop else text)
