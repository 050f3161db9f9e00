"""Internal: ``enqueue_many`` by binary COPY, for the batches that need no statement logic.

``enqueue_many.sql`` carries what a job with a dedupe key (``ON CONFLICT`` against the live
holder) needs, and takes the jobs with an ordering key too (they took the key's lock there until
issue 33; not moved to COPY since, unmeasured); a batch with neither is plain rows, and COPY
writes them without the JSON array, its parse and the conflict check: about half the time of
the statement per job (docs/performance.md, "Bulk enqueue by COPY"). The rows are the
statement's, column for column: the ids are drawn first, ascending in input order
(``enqueue_copy_ids.sql``, which also reads the transaction's ``now()``), and state, ``run_at``
and ``created_at`` are computed here from that ``now()`` as the statement computes them in SQL.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta, timezone

from django.db import connections, transaction
from psycopg.types.json import Jsonb

from jobqueue.errors import InvalidPayload
from jobqueue.store.base import MAX_STATEMENT_BYTES, NewJob
from jobqueue.store.chunks import job_bytes
from jobqueue.store.rows import fetchone
from jobqueue.store.sqltext import sql

# datetime.UTC is Python 3.11+; jobqueue supports 3.10.
UTC = timezone.utc

#: Fewest jobs written by COPY: below it the statement's one round trip wins over COPY's two
#: (ids, stream; four in autocommit, with BEGIN and COMMIT). Measured in autocommit (load 14,
#: 20 calls x 5, jobs/s, COPY / statement): 100 jobs 5,181 / 5,420; 200 6,551 / 5,361; 300
#: 7,326 / 5,941; 500 13,809 / 10,848.
COPY_MIN_JOBS = 200

#: enqueue_copy.sql's columns' types, in its order: binary COPY sends each value in its column's
#: exact binary format (``varchar`` as ``text``).
_TYPES = (
    "int8",  # id
    "text",  # queue
    "text",  # type
    "jsonb",  # payload
    "int2",  # priority
    "text",  # tenant_id
    "text",  # state
    "timestamptz",  # run_at
    "int4",  # attempts
    "int4",  # max_attempts
    "float8",  # timeout_s
    "text",  # leased_by
    "jsonb",  # errors
    "text",  # dead_reason
    "timestamptz",  # created_at
    "text",  # concurrency_key
    "int4",  # concurrency_limit
)


def _as_is(text: str) -> str:
    """Return JSON text unchanged: the payloads are JSON already (``payloads.to_json``)."""
    return text


_NO_ERRORS = Jsonb("[]", dumps=_as_is)


def copyable(jobs: Sequence[NewJob]) -> bool:
    """Return whether ``jobs`` can be written by :func:`copy_jobs`: no dedupe or ordering key."""
    return all(job.dedupe_key is None and job.ordering_key is None for job in jobs)


def copy_jobs(alias: str, jobs: Sequence[NewJob]) -> list[int]:
    """Insert ``jobs`` (:func:`copyable`, not empty) by one COPY; return their ids in order.

    One round trip and the stream, all or nothing: in the caller's transaction, or in one of
    their own (in autocommit). Each job is inserted (no dedupe key can hold it back).

    Args:
        alias: the queue database's alias.
        jobs: the validated jobs.

    Returns:
        One new id per job, ascending in input order.

    Raises:
        InvalidPayload: one job is over :data:`MAX_STATEMENT_BYTES` (PostgreSQL would close the
            connection on such a row); nothing was written.
        django.db.DatabaseError: the database refused or could not be reached.
    """
    for index, job in enumerate(jobs):
        # Characters are at most 4 bytes: only a payload that large can be over the limit.
        if len(job.payload_json) * 4 > MAX_STATEMENT_BYTES and job_bytes(job) > MAX_STATEMENT_BYTES:
            raise InvalidPayload(
                f"jobs[{index}].payload",
                f"{job_bytes(job)} bytes is over the {MAX_STATEMENT_BYTES} bytes one PostgreSQL "
                "message can carry (lower MAX_PAYLOAD_BYTES)",
            )
    connection = connections[alias]
    # No savepoint in the caller's transaction: a failed COPY leaves it as a failed statement
    # would (to be rolled back), and a savepoint would cost two more round trips.
    with transaction.atomic(using=alias, savepoint=False), connection.cursor() as cursor:
        cursor.execute(sql("enqueue_copy_ids"), {"n": len(jobs)})
        row = fetchone(cursor)
        # The transaction's now(), as enqueue_many.sql reads it: the UTC wall time, made aware
        # here whatever USE_TZ makes Django's loaders return.
        now = row.now_utc.replace(tzinfo=UTC)
        ids: list[int] = row.ids
        # Errors raised by the stream are psycopg's: Django's wrapper makes them its own, as
        # for a statement (QueueUnavailable is raised for an OperationalError).
        with connection.wrap_database_errors, cursor.cursor.copy(sql("enqueue_copy")) as copy:
            copy.set_types(_TYPES)
            write = copy.write_row
            for job, job_id in zip(jobs, ids, strict=True):
                # As enqueue_many.sql: coalesce(at, now() + delay), scheduled if after now().
                run_at = (
                    job.run_at if job.run_at is not None else now + timedelta(seconds=job.delay_s)
                )
                write(
                    (
                        job_id,
                        job.queue,
                        job.type,
                        Jsonb(job.payload_json, dumps=_as_is),
                        job.priority,
                        job.tenant_id,
                        "scheduled" if run_at > now else "ready",
                        run_at,
                        0,
                        job.max_attempts,
                        job.timeout_s,
                        "",
                        _NO_ERRORS,
                        "",
                        now,
                        job.concurrency_key,
                        job.concurrency_limit,
                    )
                )
    return ids
