"""Internal: the naming and range rules of job options, for modules that must stay leaves.

A leaf: imports nothing of ours, and raises ``ValueError`` naming the bad value (callers wrap it
in the error of their API). ``conf`` (settings), ``errors`` (``RetryAfter``), ``models`` (field
validators), ``arguments`` (the public functions) and ``cron.spec`` (cron entries) check names
and priorities with these same rules.
"""

from __future__ import annotations

import re
from typing import Any

PRIORITY_MIN, PRIORITY_MAX = -100, 100

#: Queue and dependency names (DESIGN.md).
_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,100}")


def validate_queue_name(name: Any) -> str:
    """Return ``name`` if it is a valid queue name, else raise ``ValueError`` naming it.

    Queue names match ``[A-Za-z0-9_.:-]{1,100}`` (DESIGN.md).
    """
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(f"queue name must match [A-Za-z0-9_.:-]{{1,100}}, got {name!r}")
    return name


def validate_dependency_name(name: Any) -> str:
    """Return ``name`` if it is a valid dependency name, else raise ``ValueError`` naming it.

    Dependency names follow the queue-name rule, ``[A-Za-z0-9_.:-]{1,100}``.
    """
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(f"dependency name must match [A-Za-z0-9_.:-]{{1,100}}, got {name!r}")
    return name


def validate_priority(priority: Any) -> int:
    """Return ``priority`` if it is an integer in -100..100, else raise ``ValueError``.

    The message is the problem only (``must be an integer in -100..100, got 'x'``): callers
    raise ``InvalidJobOption("priority", message)``.
    """
    if (
        isinstance(priority, bool)
        or not isinstance(priority, int)
        or not PRIORITY_MIN <= priority <= PRIORITY_MAX
    ):
        raise ValueError(f"must be an integer in {PRIORITY_MIN}..{PRIORITY_MAX}, got {priority!r}")
    return priority
