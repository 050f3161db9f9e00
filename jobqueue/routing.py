"""Which database alias a queue's jobs live on (``JOBQUEUE["QUEUE_DATABASES"]``).

One place for the decision: the client routes enqueues through :func:`queue_alias`, workers
serve every alias of :func:`queue_aliases`, the migration router and the admin use
:func:`all_queue_aliases`. An explicit ``using=`` (or ``runworkers --database``) is not routed:
it names the alias to use, as before the setting existed. Without the setting, every queue
lives on ``"default"``.
"""

from __future__ import annotations

from jobqueue.errors import InvalidJobOption
from jobqueue.settings.conf import get_settings
from jobqueue.settings.databases import DEFAULT_ALIAS, OTHER_QUEUES, shard_index

__all__ = [
    "all_queue_aliases",
    "group_alias",
    "holds_cron_entry",
    "queue_alias",
    "queue_aliases",
    "require_lives_on",
]


def queue_aliases(queue: str) -> tuple[str, ...]:
    """Return every database alias ``queue`` lives on, in shard order.

    Args:
        queue: a queue name (not validated here: an unnamed queue goes where ``"*"`` says).

    Returns:
        One alias for an unsharded queue, several for a sharded one; ``("default",)`` when the
        setting places neither this queue nor ``"*"``.

    Raises:
        JobQueueConfigurationError: the ``JOBQUEUE`` setting is invalid.
    """
    placed = get_settings().queue_databases
    return placed.get(queue) or placed.get(OTHER_QUEUES) or (DEFAULT_ALIAS,)


def queue_alias(
    queue: str,
    *,
    tenant_id: str = "",
    ordering_key: str | None = None,
    dedupe_key: str | None = None,
) -> str:
    """Return the database alias a job of ``queue`` is stored on.

    For a sharded queue the shard is a stable hash of the ordering key, else the dedupe key,
    else the tenant (:func:`jobqueue.settings.databases.shard_index`), so jobs sharing one of them
    meet on one primary; a job with none of them is dealt round-robin.

    Args:
        queue: the job's queue.
        tenant_id: the job's tenant ("" for none).
        ordering_key: the job's ordering key, or None.
        dedupe_key: the job's dedupe key, or None.

    Returns:
        A ``DATABASES`` alias.

    Raises:
        JobQueueConfigurationError: the ``JOBQUEUE`` setting is invalid.
    """
    aliases = queue_aliases(queue)
    index = shard_index(
        len(aliases), tenant_id=tenant_id, ordering_key=ordering_key, dedupe_key=dedupe_key
    )
    return aliases[index]


def all_queue_aliases() -> tuple[str, ...]:
    """Return every alias any queue lives on: the setting's, in order of first mention.

    ``"default"`` is included unless a ``"*"`` entry sends every other queue elsewhere (a queue
    the setting does not name, and an explicit ``using=None``, go there).

    Returns:
        Distinct aliases; ``("default",)`` without the setting.

    Raises:
        JobQueueConfigurationError: the ``JOBQUEUE`` setting is invalid.
    """
    placed = get_settings().queue_databases
    aliases = [alias for listed in placed.values() for alias in listed]
    if OTHER_QUEUES not in placed:
        aliases.insert(0, DEFAULT_ALIAS)
    return tuple(dict.fromkeys(aliases))


def holds_cron_entry(alias: str, queue: str, name: str) -> bool:
    """Return whether the ``JOBQUEUE["CRON"]`` entry ``name`` of ``queue`` lives on ``alias``.

    An entry lives where its jobs go (its fire and its job commit together there): on its
    queue's alias, or, for a sharded queue, on the shard its name hashes to. Without the
    setting every entry lives on the scheduler's own alias (``runworkers --database``).

    Args:
        alias: the scheduler's database alias.
        queue: the entry's queue.
        name: the entry's name.

    Returns:
        True if the scheduler on ``alias`` keeps and fires the entry.

    Raises:
        JobQueueConfigurationError: the ``JOBQUEUE`` setting is invalid.
    """
    if not get_settings().queue_databases:
        return True
    return queue_alias(queue, dedupe_key=name) == alias


def group_alias(queue: str | None, using: str | None) -> str:
    """Return the alias of jobs stored together (a chain's steps, a batch and its members).

    They share one database: a child finds its parents there, a batch row counts its members'
    outcomes in the same transaction. ``using`` when given, else the first alias of ``queue``
    (a chain's first step's, a batch's callbacks'), else ``"default"``.
    """
    if using is not None:
        return using
    return queue_aliases(queue)[0] if queue else DEFAULT_ALIAS


def require_lives_on(queue: str, alias: str, what: str) -> None:
    """Refuse a job of ``queue`` stored on ``alias`` where no worker of the queue looks.

    Only with ``QUEUE_DATABASES`` set: without it ``using=`` names any alias, as before.

    Args:
        queue: the job's queue.
        alias: the alias the job would be stored on (its chain's or batch's).
        what: how the message names the job's option, e.g. ``steps[1].queue``.

    Raises:
        InvalidJobOption: the setting places ``queue`` on other aliases only; nothing written.
    """
    if not get_settings().queue_databases:
        return
    aliases = queue_aliases(queue)
    if alias not in aliases:
        raise InvalidJobOption(
            what,
            f"queue {queue!r} lives on {', '.join(map(repr, aliases))} (QUEUE_DATABASES), not "
            f"on {alias!r}, where this chain or batch is stored with its other jobs: workers "
            f"of {queue!r} would never look there; use one database for all of them (using=)",
        )
