"""Internal: enqueue inside the caller's transaction when the queue lives on another database.

A job row on database B cannot commit with the caller's rows on database A. So when ``enqueue``
runs while an ``atomic()`` block is open on an alias A of ``OUTBOX_DATABASES`` (default
``["default"]``) and none is open on the queue's alias B, the job goes to A's outbox table, in
the caller's transaction: a rollback leaves no job, a commit leaves a row that the workers of B
relay to B (``jobqueue.maintenance.relay``), even if the caller's process dies right after
the commit.

The caller's alias is the one with an open ``atomic()`` block (Django's ``in_atomic_block``):
nothing to pass. When blocks are open on several such aliases and none on B, the caller must
say which one holds its rows, with ``JOBQUEUE["OUTBOX_DATABASES"]``; enqueue refuses to guess.
Outside any atomic block on another alias, enqueue writes to B directly, as it always did.

The job's id is drawn from B's sequence now (one autocommit round trip to B), so ``enqueue``
returns the id the job will have, and the relay inserts it under that id: relaying a row twice
makes one job.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.db import connections

from jobqueue.errors import InvalidJobOption
from jobqueue.settings.conf import get_settings
from jobqueue.store import NewJob, get_store
from jobqueue.store.chunks import plan_chunks
from jobqueue.store.outage import writing

__all__ = ["caller_alias", "put", "put_many"]


def caller_alias(queue_alias: str) -> str | None:
    """Return the alias whose open transaction a job for ``queue_alias`` must join via its outbox.

    Args:
        queue_alias: the database alias of the job's queue.

    Returns:
        None when the job goes to ``queue_alias`` directly: an atomic block is open there (the
        job joins it), or on no alias of ``OUTBOX_DATABASES``. Else that one alias.

    Raises:
        InvalidJobOption: atomic blocks are open on several outbox aliases (none on the queue's),
            so which transaction holds the caller's rows is ambiguous.
    """
    if connections[queue_alias].in_atomic_block:
        return None
    # Only a connection this thread has used can be in a block: never make one just to ask.
    used = {conn.alias: conn for conn in connections.all(initialized_only=True)}
    open_here = [
        alias
        for alias in get_settings().outbox_databases
        if alias != queue_alias and alias in used and used[alias].in_atomic_block
    ]
    if len(open_here) > 1:
        raise InvalidJobOption(
            "using",
            f"atomic blocks are open on {', '.join(open_here)} and none on the queue's database "
            f"{queue_alias!r}: name the one that holds your rows in "
            "JOBQUEUE['OUTBOX_DATABASES'], or enqueue outside the other blocks",
        )
    return open_here[0] if open_here else None


def put(job: NewJob, *, queue_alias: str, caller: str) -> tuple[int, bool, datetime]:
    """Write ``job`` to the outbox on ``caller`` (in its open transaction), for ``queue_alias``.

    Args:
        job: the validated job.
        queue_alias: the alias of the job's queue, where the relay inserts it.
        caller: the alias whose transaction is open (:func:`caller_alias`).

    Returns:
        ``(job id, True, the outbox row's created_at)``: the id the job gets on ``queue_alias``.

    Raises:
        QueueUnavailable: ``queue_alias`` (for the id) or ``caller`` cannot be reached.
    """
    with writing(queue_alias):
        job_id = get_store(queue_alias).reserve_job_id()
    with writing(caller):
        created_at = get_store(caller).put_outbox(queue_alias, job_id, job)
    return job_id, True, created_at


def put_many(
    jobs: Sequence[NewJob], *, queue_alias: str, caller: str, chunk_bytes: int
) -> list[int]:
    """Write ``jobs`` to the outbox on ``caller`` (in its open transaction), for ``queue_alias``.

    The ``enqueue_many`` of :func:`put`: the ids are drawn in one statement on ``queue_alias``,
    and the rows written in one statement per ``chunk_bytes`` of jobs on ``caller``. Jobs of
    the batch that share a (queue, dedupe key) become one row (the first of them), whose id
    each of them gets, as ``enqueue_many`` does on the queue's own database; a key a live job
    holds there is found by the relay, which then inserts nothing.

    Args:
        jobs: the validated jobs (none with parents).
        queue_alias: the alias of their queue, where the relay inserts them.
        caller: the alias whose transaction is open (:func:`caller_alias`).
        chunk_bytes: most bytes of jobs per statement (>= 1).

    Returns:
        One id per job, in order: the ids the jobs get on ``queue_alias``.

    Raises:
        QueueUnavailable: ``queue_alias`` (for the ids) or ``caller`` cannot be reached.
        InvalidPayload: one job alone is over what one PostgreSQL message can carry.
    """
    first: dict[tuple[str, str], int] = {}
    owner = list(range(len(jobs)))
    for index, job in enumerate(jobs):
        if job.dedupe_key is not None:
            owner[index] = first.setdefault((job.queue, job.dedupe_key), index)
    written = [index for index in range(len(jobs)) if owner[index] == index]
    chunks = plan_chunks(jobs, written, chunk_bytes)
    with writing(queue_alias):
        reserved = get_store(queue_alias).reserve_job_ids(len(written))
    ids = [0] * len(jobs)
    for index, job_id in zip(written, reserved, strict=True):
        ids[index] = job_id
    with writing(caller):
        store = get_store(caller)
        for chunk in chunks:
            store.put_outbox_many(queue_alias, [(ids[index], jobs[index]) for index in chunk])
    return [ids[owner[index]] for index in range(len(jobs))]
