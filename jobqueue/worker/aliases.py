"""Which database aliases a ``runworkers`` serves, and which of its queues on each.

A queue may live on another database than ``default``, or on several (``JOBQUEUE
["QUEUE_DATABASES"]``, :mod:`jobqueue.routing`). ``runworkers`` then runs one worker process per
alias (each with its own claim loop, listener, heartbeat and scheduler), so no alias waits on
another's claims or outage. ``--database`` names one alias and serves every queue there, as
before the setting existed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from jobqueue.routing import all_queue_aliases, queue_aliases
from jobqueue.settings.queues import EVERY_QUEUE

__all__ = ["AliasShare", "alias_shares"]


@dataclass(frozen=True, slots=True)
class AliasShare:
    """The queues (with their weights) one worker process serves on one database alias."""

    alias: str
    queues: tuple[str, ...]
    weights: tuple[int, ...]


def alias_shares(
    queues: Sequence[str], weights: Sequence[int], database: str | None = None
) -> tuple[AliasShare, ...]:
    """Split the queues a ``runworkers`` serves by the alias they live on.

    A sharded queue is served on each of its aliases; ``*`` (every queue) on every queue alias
    (:func:`~jobqueue.routing.all_queue_aliases`). The queues keep their order and weights on
    each alias (``--strict`` order holds per alias).

    Args:
        queues: queue names, ``*`` last if at all.
        weights: one weight per queue.
        database: an explicit alias (``--database``): every queue is served there only.

    Returns:
        One share per alias, aliases in order of first need; never empty for non-empty queues.

    Raises:
        JobQueueConfigurationError: the ``JOBQUEUE`` setting is invalid.
    """
    if database is not None:
        return (AliasShare(database, tuple(queues), tuple(weights)),)
    by_alias: dict[str, list[tuple[str, int]]] = {}
    for queue, weight in zip(queues, weights, strict=True):
        aliases = all_queue_aliases() if queue == EVERY_QUEUE else queue_aliases(queue)
        for alias in aliases:
            by_alias.setdefault(alias, []).append((queue, weight))
    return tuple(
        AliasShare(alias, tuple(q for q, _ in served), tuple(w for _, w in served))
        for alias, served in by_alias.items()
    )
