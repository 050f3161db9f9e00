"""Internal: which database alias a queue's jobs live on (``JOBQUEUE["QUEUE_DATABASES"]``).

STUB of issue 16 part 2 on the outbox branch, with the agreed signatures only: a plain mapping,
a sharded queue's shard by crc32 of its ordering key, dedupe key or tenant. Part 2's module
replaces this file at merge.
"""

from __future__ import annotations

import zlib

from django.db import connections

from .conf import get_settings

__all__ = ["all_queue_aliases", "queue_alias", "queue_aliases"]


def queue_aliases(queue: str) -> tuple[str, ...]:
    """Return every alias ``queue`` lives on (its shards), from ``QUEUE_DATABASES``.

    Args:
        queue: a queue name.

    Returns:
        One alias, or several for a sharded queue; ``("default",)`` when nothing maps it.
    """
    mapping = get_settings().queue_databases
    return mapping.get(queue) or mapping.get("*") or ("default",)


def queue_alias(
    queue: str,
    *,
    tenant_id: str = "",
    ordering_key: str | None = None,
    dedupe_key: str | None = None,
) -> str:
    """Return the alias one job of ``queue`` goes to.

    Args:
        queue: a queue name.
        tenant_id: the job's tenant ("" for none).
        ordering_key: the job's ordering key, if any (wins over the others for the shard).
        dedupe_key: the job's dedupe key, if any.

    Returns:
        The queue's alias; for a sharded queue, the shard of crc32 of the first of
        ``ordering_key``, ``dedupe_key``, ``tenant_id`` given.
    """
    aliases = queue_aliases(queue)
    if len(aliases) == 1:
        return aliases[0]
    key = ordering_key if ordering_key is not None else dedupe_key
    if key is None:
        key = tenant_id
    return aliases[zlib.crc32(key.encode("utf-8")) % len(aliases)]


def all_queue_aliases() -> tuple[str, ...]:
    """Return every alias any queue lives on, in ``DATABASES`` order."""
    used = {a for aliases in get_settings().queue_databases.values() for a in aliases}
    used = used or {"default"}
    return tuple(a for a in connections.settings if a in used)
