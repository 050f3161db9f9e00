"""Internal: which concurrency key and limit a job gets at enqueue (the claim's: limits/policy.py).

"At most N running at once, across all workers" (issue 18). A job has at most one key, the first
that applies:

1. ``enqueue(concurrency_key=...)``;
2. the type's ``@job(concurrency_key=...)``: a fixed string, or a function of the payload
   (``lambda account_id, **_: f"acct:{account_id}"``) computed here, once;
3. ``type:<name>`` when the type declares ``@job(concurrency_limit=N)`` without a key;
4. ``dependency:<name>`` when ``JOBQUEUE["CONCURRENCY_LIMITS"]`` lists the type's dependency;
5. ``type:<name>`` when ``JOBQUEUE["CONCURRENCY_LIMITS"]`` lists the type.

Its limit is the setting's for that key, else ``enqueue(concurrency_limit=...)``, else the type's
``concurrency_limit``. Both are stored on the row; the claim (``store/sql/claim.sql``) counts the
key's leased rows and applies the setting's limit over the stored one, so an operator's change
binds jobs already queued.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jobqueue.errors import InvalidJobOption
from jobqueue.registry import JobType
from jobqueue.settings.concurrency import (
    KEY_MAX_LENGTH,
    MAX_CONCURRENCY_LIMIT,
    dependency_key,
    type_key,
)
from jobqueue.settings.conf import JobQueueSettings
from jobqueue.validation import is_count, is_text

__all__ = ["resolve"]


def _computed_key(job_type: JobType, payload: Mapping[str, Any]) -> str | None:
    """Return the type's ``concurrency_key`` for ``payload`` (None: this job is not limited)."""
    key = job_type.concurrency_key
    if not callable(key):
        return key
    try:
        computed = key(**payload)
    except Exception as exc:  # noqa: BLE001 - any failure of user code is a bad payload here
        raise InvalidJobOption(
            "concurrency_key",
            f"{job_type.name}'s concurrency_key function failed on this payload: "
            f"{type(exc).__name__}: {exc}",
        ) from None
    if computed is not None and (not is_text(computed, KEY_MAX_LENGTH) or not computed):
        raise InvalidJobOption(
            "concurrency_key",
            f"{job_type.name}'s concurrency_key function must return a non-empty string of at "
            f"most {KEY_MAX_LENGTH} characters or None, got {computed!r}",
        )
    return computed


def resolve(
    conf: JobQueueSettings,
    job_type: JobType | None,
    type_name: str,
    payload: Mapping[str, Any],
    key: str | None,
    limit: int | None,
) -> tuple[str | None, int | None]:
    """Return the ``(concurrency_key, concurrency_limit)`` to store on a new job.

    Args:
        conf: the validated settings (``CONCURRENCY_LIMITS``).
        job_type: the registered type, or None (a type registered elsewhere).
        type_name: the job's type name.
        payload: the job's payload (the type's key function is called with it).
        key: ``enqueue``'s ``concurrency_key`` (None: the type's, or none).
        limit: ``enqueue``'s ``concurrency_limit`` (None: the setting's or the type's).

    Returns:
        ``(None, None)`` for a job no limit applies to.

    Raises:
        InvalidJobOption: a bad ``concurrency_key`` or ``concurrency_limit``, a key function
            that fails or returns a bad key, or a key with no limit anywhere.
    """
    if key is not None and (not is_text(key, KEY_MAX_LENGTH) or not key):
        raise InvalidJobOption(
            "concurrency_key",
            f"must be a non-empty string of at most {KEY_MAX_LENGTH} characters, got {key!r}",
        )
    if limit is not None and not is_count(limit, 1, MAX_CONCURRENCY_LIMIT):
        raise InvalidJobOption(
            "concurrency_limit",
            f"must be an integer in 1..{MAX_CONCURRENCY_LIMIT:,}, got {limit!r}",
        )
    settings = conf.concurrency_limits
    if key is None and job_type is not None:
        if job_type.concurrency_key is not None:
            key = _computed_key(job_type, payload)
            if key is None:
                return None, None
        elif job_type.concurrency_limit is not None:
            key = type_key(type_name)
        elif job_type.dependency and dependency_key(job_type.dependency) in settings:
            key = dependency_key(job_type.dependency)
    if key is None and type_key(type_name) in settings:
        key = type_key(type_name)
    if key is None:
        if limit is not None:
            raise InvalidJobOption(
                "concurrency_limit", "needs a concurrency_key (or a type that declares one)"
            )
        return None, None
    found = settings.get(key, limit)
    if found is None and job_type is not None:
        found = job_type.concurrency_limit
    if found is None:
        raise InvalidJobOption(
            "concurrency_key",
            f"{key!r} has no limit: pass concurrency_limit=, declare @job(concurrency_limit=) "
            f"or list it in JOBQUEUE['CONCURRENCY_LIMITS']",
        )
    return key, found
