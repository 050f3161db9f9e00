"""Queue databases: the ``JOBQUEUE["QUEUE_DATABASES"]`` setting, parsed (a leaf: no Django, no DB).

``{"emails": "mail_db", "bulk": ["shard_a", "shard_b"], "*": "default"}`` stores the queue
``emails`` on the database alias ``mail_db``, shards ``bulk`` over ``shard_a`` and ``shard_b``,
and every other queue on ``default`` (``*``; without it, other queues stay on ``default``).
Which shard a job goes to is :func:`shard_index`; the routing calls are in
``jobqueue/routing.py``, the migration router in ``jobqueue/routers.py``.
"""

from __future__ import annotations

import itertools
import zlib
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from jobqueue.errors import JobQueueConfigurationError
from jobqueue.validation import validate_queue_name

__all__ = ["DEFAULT_ALIAS", "OTHER_QUEUES", "parse_queue_databases", "shard_index"]

#: The key for every queue the setting does not name.
OTHER_QUEUES = "*"

#: Where a queue lives when the setting does not place it (Django's default alias).
DEFAULT_ALIAS = "default"

_WHERE = "JOBQUEUE['QUEUE_DATABASES']"

# Keyless, tenantless jobs depend on no shard: they are dealt round-robin, for an even split.
_DEAL = itertools.count()


def parse_queue_databases(value: Any) -> Mapping[str, tuple[str, ...]]:
    """Validate ``JOBQUEUE["QUEUE_DATABASES"]``: ``{queue | "*": alias | [alias, ...]}``.

    Whether the aliases are in ``DATABASES`` is checked by ``manage.py check`` (jobqueue.E022),
    not here: settings are read before the database settings may be complete.

    Args:
        value: the setting's value.

    Returns:
        Read-only mapping: queue name (or ``"*"``) -> its aliases, in shard order (one for an
        unsharded queue).

    Raises:
        JobQueueConfigurationError: not a dict; a key that is not a queue name or ``"*"``; a
            value that is not an alias or a non-empty list of distinct aliases.
    """
    if not isinstance(value, dict):
        raise JobQueueConfigurationError(
            f"{_WHERE} must be a dict like {{'emails': 'mail_db', 'bulk': ['shard_a', "
            f"'shard_b'], '*': 'default'}}, got {value!r}"
        )
    parsed: dict[str, tuple[str, ...]] = {}
    for queue, aliases in value.items():
        if queue != OTHER_QUEUES:
            try:
                validate_queue_name(queue)
            except ValueError as exc:
                raise JobQueueConfigurationError(f"{_WHERE}: key {queue!r}: {exc}") from exc
        listed = [aliases] if isinstance(aliases, str) else aliases
        if not isinstance(listed, list | tuple) or not listed:
            raise JobQueueConfigurationError(
                f"{_WHERE}[{queue!r}] must be a database alias or a non-empty list of them, "
                f"got {aliases!r}"
            )
        for alias in listed:
            if not isinstance(alias, str) or not alias:
                raise JobQueueConfigurationError(
                    f"{_WHERE}[{queue!r}]: aliases are non-empty strings, got {alias!r}"
                )
        if len(set(listed)) != len(listed):
            raise JobQueueConfigurationError(
                f"{_WHERE}[{queue!r}] lists an alias twice: {aliases!r}"
            )
        parsed[queue] = tuple(listed)
    return MappingProxyType(parsed)


def shard_index(
    shards: int,
    *,
    tenant_id: str = "",
    ordering_key: str | None = None,
    dedupe_key: str | None = None,
) -> int:
    """Return which of ``shards`` shards a job goes to (0-based).

    The ordering key decides when given (its jobs must run one at a time, in order, so all of
    them on one primary), else the dedupe key (a second enqueue must find the first job), else
    the tenant (its cap and fair share are counted per primary). The hash is CRC-32 of the
    UTF-8 text, the same in every process and release (Python's ``hash()`` is salted per
    process). A job with none of the three is dealt round-robin: nothing depends on its shard.

    Args:
        shards: how many shards (>= 1).
        tenant_id: the job's tenant ("" for none).
        ordering_key: the job's ordering key, or None.
        dedupe_key: the job's dedupe key, or None.

    Returns:
        An index in ``range(shards)``.
    """
    if shards == 1:
        return 0
    key = ordering_key if ordering_key is not None else dedupe_key
    if key is None:
        if not tenant_id:
            return next(_DEAL) % shards
        key = tenant_id
    return zlib.crc32(key.encode("utf-8", "surrogatepass")) % shards
