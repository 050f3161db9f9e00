"""The claim as a server-side function: planned once per database session, not once per call.

The claim (``store/sql/claim.sql``) is the hottest statement and the longest: planning it cost
the server about as much as running it (1-2 ms of a 3 ms claim on one tenant, measured with
``EXPLAIN (ANALYZE)``; more on a loaded machine). Django's psycopg backend binds parameters on
the client, so nothing is prepared, and behind a transaction pooler nothing could be. A PL/pgSQL
function's statements are planned once per session and reused, whichever client or pooler sent
the call, so the claim is installed as one: ``jobqueue_claim_<hash>`` for each of its two texts
(with and without the rate limits' sections), the hash taken over the function's text.

* The function is created by ``migrate`` (the ``post_migrate`` handler in ``apps.py`` calls
  :func:`install`) under the name of the text this version ships; a process running another
  version (a rolling deploy) finds the name of its own text or, missing it, sends the statement
  itself as before (:func:`claim_call`), so a function is never out of step with its caller.
  Old functions are left in place for the processes still running them.
* ``plan_cache_mode = force_generic_plan``: one plan whatever the parameters (the claim's shape
  does not depend on them: every path is an index probe per queue, lane or job); ``jit = off``
  (docs/decisions.md, "The claim in two levels"); ``enable_seqscan = off``: the one plan is made
  at a session's first claim, on the tables' sizes then, and a session begun on an empty jobs or
  lanes table would otherwise scan them whole at every claim until the next ANALYZE (a drain
  measured one: 6.5 ms of a 9 ms claim at 5,000 rows); ``enable_bitmapscan = off``: every probe
  is a walk of an index in the claim's order that stops at its ``LIMIT``, and a bitmap scan reads
  every match first (a plan made when the statistics did not match the table took one for the
  limited types' probe: 6,011 rows read for a claim of 10 over a 3,000-job backlog of that type,
  3,021 without it; seen once, not reproduced by a test).
* A role without the right to create functions keeps the plain statement: :func:`install` says
  so in a warning and the claim works as before.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import re
import weakref
from typing import Any

from django.db import DatabaseError, connections

from jobqueue.store.sqltext import sql

__all__ = ["claim_call", "function_text", "install", "install_after_migrate"]

logger = logging.getLogger("jobqueue.store")

#: The SQL type of each of the claim's parameters (``%(name)s`` in claim.sql).
PARAM_TYPES: dict[str, str] = {
    "queues": "text[]",
    "weights": "float8[]",
    "start": "float8[]",
    "strict": "boolean",
    "default_cap": "int",
    "cap_tenants": "text[]",
    "cap_values": "int[]",
    "tenant_weights": "jsonb",
    "limits": "jsonb",
    "worker_id": "text",
    "max_jobs": "int",
    "lane_window": "int",
    "lease_s": "float8",
    "now": "timestamptz",
    "rl_keys": "text[]",
    "rl_rates": "float8[]",
    "rl_bursts": "float8[]",
    "rl_tenant_rate": "float8",
    "rl_tenant_burst": "float8",
    "rl_tenant_own": "text[]",
    "rl_types": "text[]",
    "rl_type_keys": "text[]",
}

#: The claim's RETURNING columns and their types (jobqueue_job's, and the ranks it computes).
RESULT = (
    "id bigint, type varchar, payload jsonb, attempts int, max_attempts int, timeout_s float8, "
    "lease_token uuid, lease_until timestamptz, queue varchar, priority smallint, "
    "tenant_id varchar, pos bigint, nth_of_queue bigint, tag float8, suspect boolean, "
    "concurrency_key varchar, batch_id bigint, trace jsonb"
)

_PLACEHOLDER = re.compile(r"%\((\w+)\)s")


def _names(statement: str) -> list[str]:
    """Return the statement's parameter names, in order of first use."""
    return list(dict.fromkeys(_PLACEHOLDER.findall(sql(statement))))


@functools.cache
def function_text(statement: str) -> tuple[str, str]:
    """Return the name and ``CREATE FUNCTION`` text of ``statement`` as a function.

    Args:
        statement: ``"claim"`` or ``"claim~rates"`` (``sqltext.sql`` names).

    Returns:
        ``(name, text)``: ``jobqueue_claim_<12 hex digits of the text's SHA-1>`` and its DDL.
        Computed once per statement (the claim asks for the name at every call).

    Raises:
        KeyError: the statement has a parameter :data:`PARAM_TYPES` does not type.
    """
    names = _names(statement)
    args = ", ".join(f"p_{name} {PARAM_TYPES[name]}" for name in names)
    body = _PLACEHOLDER.sub(lambda m: f"p_{m.group(1)}", sql(statement)).replace("%%", "%")
    template = (
        "CREATE OR REPLACE FUNCTION {name}({args}) RETURNS TABLE({result})\n"
        "LANGUAGE plpgsql VOLATILE\n"
        "SET jit = off SET plan_cache_mode = force_generic_plan SET enable_seqscan = off\n"
        "SET enable_bitmapscan = off\n"
        "AS $jobqueue$\n#variable_conflict use_column\nBEGIN\nRETURN QUERY {body};\nEND\n$jobqueue$"
    )
    digest = hashlib.sha1(template.format(name="", args=args, result=RESULT, body=body).encode())
    name = f"jobqueue_claim_{digest.hexdigest()[:12]}"
    return name, template.format(name=name, args=args, result=RESULT, body=body)


def install(alias: str) -> bool:
    """Create the claim's functions on database ``alias`` (PostgreSQL; ``migrate`` calls this).

    Args:
        alias: a Django database alias.

    Returns:
        True when both exist now; False when the role may not create them (logged as a warning:
        the claim then sends its statement, planned per call).
    """
    connection = connections[alias]
    if connection.vendor != "postgresql":
        return False
    try:
        with connection.cursor() as cursor:
            for statement in ("claim", "claim~rates"):
                cursor.execute(function_text(statement)[1])
    except DatabaseError as exc:
        logger.warning(
            "jobqueue could not create its claim function on database %r (%s); the claim is "
            "sent as a statement and planned on every call",
            alias,
            str(exc).strip(),
        )
        return False
    if connection.connection is not None:
        _known.pop(connection.connection, None)
    return True


def install_after_migrate(using: str = "default", **_: Any) -> None:
    """``post_migrate`` receiver: :func:`install` on the database just migrated."""
    install(using)


#: Per open psycopg connection: the function names known to exist (weak: a closed connection's
#: entry goes with it, and a new connection checks again).
_known: weakref.WeakKeyDictionary[Any, dict[str, bool]] = weakref.WeakKeyDictionary()


def claim_call(alias: str, statement: str) -> str | None:
    """Return the text that calls ``statement``'s function on ``alias``, or None to send it.

    Checks once per connection that this version's function exists (one catalogue lookup).

    Args:
        alias: a Django database alias (PostgreSQL).
        statement: ``"claim"`` or ``"claim~rates"``.

    Returns:
        ``SELECT * FROM jobqueue_claim_<hash>(%(queues)s::text[], ...)``, or None when the
        function is missing (not migrated yet, another version's, no right to create it).
    """
    name, _ = function_text(statement)
    connection = connections[alias]
    connection.ensure_connection()
    raw = connection.connection
    try:
        known = _known.setdefault(raw, {})
    except TypeError:  # not weakly referenceable: check every time
        known = {}
    if name not in known:
        with connection.cursor() as cursor:
            cursor.execute(sql("routine_exists"), {"name": name})
            known[name] = bool(cursor.fetchone()[0])
    if not known[name]:
        return None
    return _call_text(statement)


@functools.cache
def _call_text(statement: str) -> str:
    """Return ``SELECT * FROM <function>(%(queues)s::text[], ...)`` for ``statement``."""
    name, _ = function_text(statement)
    args = ", ".join(f"%({n})s::{PARAM_TYPES[n]}" for n in _names(statement))
    return f"SELECT * FROM {name}({args})"
