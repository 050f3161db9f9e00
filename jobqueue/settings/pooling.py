"""Pooler mode: the ``JOBQUEUE["POOLED_DATABASES"]`` setting, parsed (a leaf: no Django, no DB).

``{"default": {"LISTEN_DATABASE": "direct"}}`` marks the database alias ``default`` as reached
through a transaction-mode pooler (PgBouncer ``pool_mode = transaction``): jobqueue then keeps
no session state on it and never LISTENs through it. Wake-ups come from ``LISTEN_DATABASE``, an
alias of ``DATABASES`` that reaches the same primary directly (one listening connection per
worker process), or, with ``None`` (or the key left out), from polling every
``POLL_INTERVAL_SECONDS``. What the mode changes at run time is in ``jobqueue/store/pooler.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from jobqueue.errors import JobQueueConfigurationError

__all__ = ["LISTEN_DATABASE", "parse_pooled_databases"]

#: The one key of a pooled alias's entry: the alias its workers LISTEN on, or None (poll).
LISTEN_DATABASE = "LISTEN_DATABASE"

_WHERE = "JOBQUEUE['POOLED_DATABASES']"


def parse_pooled_databases(value: Any) -> Mapping[str, str | None]:
    """Validate ``JOBQUEUE["POOLED_DATABASES"]``: ``{alias: {"LISTEN_DATABASE": alias | None}}``.

    Whether the aliases are in ``DATABASES`` is checked by ``manage.py check`` (jobqueue.E020),
    not here: settings are read before the database settings may be complete.

    Args:
        value: the setting's value.

    Returns:
        Read-only mapping: pooled alias -> the alias its workers LISTEN on (None: they poll).

    Raises:
        JobQueueConfigurationError: not a dict of non-empty alias names to dicts, an unknown key
            in an entry, a ``LISTEN_DATABASE`` that is not a non-empty string or None, or one
            that names the pooled alias itself (LISTEN does not work through the pooler).
    """
    if not isinstance(value, dict):
        raise JobQueueConfigurationError(
            f"{_WHERE} must be a dict like {{'default': {{'LISTEN_DATABASE': 'direct'}}}}, "
            f"got {value!r}"
        )
    parsed: dict[str, str | None] = {}
    for alias, entry in value.items():
        if not isinstance(alias, str) or not alias:
            raise JobQueueConfigurationError(
                f"{_WHERE}: keys are database aliases (non-empty strings), got {alias!r}"
            )
        if not isinstance(entry, dict):
            raise JobQueueConfigurationError(
                f"{_WHERE}[{alias!r}] must be a dict (maybe empty) like "
                f"{{'LISTEN_DATABASE': 'direct'}}, got {entry!r}"
            )
        unknown = sorted(map(str, set(entry) - {LISTEN_DATABASE}))
        if unknown:
            raise JobQueueConfigurationError(
                f"{_WHERE}[{alias!r}] has unknown keys: {', '.join(unknown)} "
                f"(known: {LISTEN_DATABASE})"
            )
        listen = entry.get(LISTEN_DATABASE)
        if listen is not None and (not isinstance(listen, str) or not listen):
            raise JobQueueConfigurationError(
                f"{_WHERE}[{alias!r}]['{LISTEN_DATABASE}'] must be a database alias or None "
                f"(poll), got {listen!r}"
            )
        if listen == alias:
            raise JobQueueConfigurationError(
                f"{_WHERE}[{alias!r}]['{LISTEN_DATABASE}'] names the pooled alias itself: LISTEN "
                "does not work through a transaction pooler; name an alias that reaches the "
                "primary directly, or None to poll"
            )
        parsed[alias] = listen
    return MappingProxyType(parsed)
