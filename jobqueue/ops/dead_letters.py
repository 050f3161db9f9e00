"""Internal: the dead letters grouped by error, for the admin's dead-letter page.

Dead jobs whose last error has the same exception type and message are one group (as Sidekiq's
and GoodJob's dead sets read): its count, when it was first and last seen, and a link to the
list of its jobs. The grouping is the store's (``dead_letter_groups``); messages are masked here
with the one masking function (``ADMIN_MASKED_KEYS``, and the masked values of the group's
newest job, which the message may quote).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from jobqueue.masking import safe_text, secrets_of
from jobqueue.models import Job
from jobqueue.store import get_store
from jobqueue.store.interface import DEAD_LETTER_GROUPS, message_digest

#: Most jobs the list filtered by one group shows (the newest).
GROUP_IDS_LIMIT = 10_000


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorGroup:
    """One group as an operator reads it: the stored type and message, and the masked one."""

    error_type: str
    #: :func:`~jobqueue.store.interface.message_digest` of the stored message: the group's
    #: key in a link (the message itself may hold a secret).
    digest: str
    #: The message with masked keys' values hidden and control characters escaped.
    shown_message: str
    count: int
    first_seen: datetime
    last_seen: datetime


def error_groups(using: str = "default", limit: int = DEAD_LETTER_GROUPS) -> list[ErrorGroup]:
    """Return the dead letters of database ``using`` grouped by their last error, most first.

    Args:
        using: database alias.
        limit: most groups (>= 1).
    """
    groups = get_store(using).dead_letter_groups(limit)
    # The values a message may quote that are masked: those of each group's newest job (one
    # read of the shown groups' rows; the same message quotes the same values).
    secrets = {
        pk: secrets_of(payload, result)
        for pk, payload, result in Job.objects.using(using)
        .filter(pk__in=[g.newest_id for g in groups])
        .values_list("pk", "payload", "result")
    }
    return [
        ErrorGroup(
            error_type=g.error_type,
            digest=message_digest(g.message),
            shown_message=safe_text(g.message, secrets.get(g.newest_id, ())),
            count=g.count,
            first_seen=g.first_seen,
            last_seen=g.last_seen,
        )
        for g in groups
    ]


def group_ids(error_type: str, digest: str, using: str = "default") -> list[int]:
    """Return the ids of one group's dead jobs, the newest :data:`GROUP_IDS_LIMIT` of them.

    Args:
        error_type: the group's exception type.
        digest: the group's :attr:`ErrorGroup.digest`.
        using: database alias.
    """
    return get_store(using).dead_letter_ids(error_type, digest, GROUP_IDS_LIMIT)


def find_group(error_type: str, digest: str, using: str = "default") -> ErrorGroup | None:
    """Return the group a link names (for its masked message), None when it has gone."""
    for group in error_groups(using):
        if group.error_type == error_type and group.digest == digest:
            return group
    return None
