"""Internal: split an ``enqueue_many`` batch into statements bounded in jobs and in bytes.

A batch of a thousand 1 MB payloads in one statement made the client build (and copy) a
gigabyte message, and the server dropped the connection on its 1 GB message limit, which the
caller saw as "database unavailable". Chunks bounded in bytes keep the client's extra memory
near ``chunk_bytes`` and every message far under the server's limit.
"""

from __future__ import annotations

from collections.abc import Sequence

from jobqueue.errors import InvalidPayload
from jobqueue.store.interface import ENQUEUE_MANY_CHUNK, MAX_STATEMENT_BYTES, NewJob

#: Bytes of JSON one job adds to a statement besides its payload (field names, options).
JOB_OVERHEAD_BYTES = 256


def _utf8_len(text: str | None) -> int:
    if text is None:
        return 0
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def job_bytes(job: NewJob) -> int:
    """Return about how many bytes ``job`` adds to an enqueue_many statement."""
    return (
        JOB_OVERHEAD_BYTES
        + _utf8_len(job.payload_json)
        + _utf8_len(job.type)
        + _utf8_len(job.queue)
        + _utf8_len(job.tenant_id)
        + _utf8_len(job.dedupe_key)
        + _utf8_len(job.ordering_key)
        + _utf8_len(job.concurrency_key)
    )


def plan_chunks(
    jobs: Sequence[NewJob], indices: Sequence[int], chunk_bytes: int
) -> list[list[int]]:
    """Return ``indices`` in statements of at most ``ENQUEUE_MANY_CHUNK`` jobs and ``chunk_bytes``.

    Jobs with a dedupe key come first, in (queue, key) byte order (as enqueue_many.sql inserts
    them within a statement), so every batch takes the keys' index entries in one global order
    and two batches never deadlock; the rest follow in input order. A job larger than
    ``chunk_bytes`` goes alone.

    Raises:
        InvalidPayload: a job alone is over :data:`MAX_STATEMENT_BYTES`, which no statement
            can carry; ``path`` names it as ``jobs[<index>].payload``.
    """
    ordered = sorted(
        indices,
        key=lambda i: (
            jobs[i].dedupe_key is None,
            jobs[i].queue,
            jobs[i].dedupe_key or "",
            i,
        ),
    )
    chunks: list[list[int]] = []
    current: list[int] = []
    size = 0
    for index in ordered:
        cost = job_bytes(jobs[index])
        if cost > MAX_STATEMENT_BYTES:
            raise InvalidPayload(
                f"jobs[{index}].payload",
                f"{cost} bytes is over the {MAX_STATEMENT_BYTES} bytes one PostgreSQL message "
                "can carry (lower MAX_PAYLOAD_BYTES)",
            )
        if current and (size + cost > chunk_bytes or len(current) >= ENQUEUE_MANY_CHUNK):
            chunks.append(current)
            current, size = [], 0
        current.append(index)
        size += cost
    if current:
        chunks.append(current)
    return chunks
