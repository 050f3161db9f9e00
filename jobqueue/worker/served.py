"""Internal: a supervised child tells its supervisor that it has served (issue 32).

The supervisor's restart backoff is for crash loops: a child that dies before it serves. A child
serves once its first claim statement has returned (jobs or none: it started, reached the
database and asked for work). The supervisor cannot see that from outside, and it touches no
database, so each slot has one byte of memory shared with its child (an anonymous ``mmap``
made before the fork): :func:`mark_served` sets it, from the claim loop, once per process.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable

_on_served: Callable[[], None] | None = None


class ServedFlags:
    """One byte per supervisor slot, shared with the slots' forked children.

    Args:
        slots: how many slots the supervisor runs.
    """

    def __init__(self, slots: int) -> None:
        # Anonymous and MAP_SHARED (the default): the children inherit it through fork.
        self._memory = mmap.mmap(-1, max(slots, 1))

    def reset(self, slot: int) -> None:
        """Mark ``slot``'s next child as not having served yet (before forking it)."""
        self._memory[slot] = 0

    def served(self, slot: int) -> bool:
        """Return whether ``slot``'s current (or last) child has served."""
        return self._memory[slot] == 1

    def install(self, slot: int) -> None:
        """In the child of ``slot``: make :func:`mark_served` set its byte."""

        def mark() -> None:
            self._memory[slot] = 1

        global _on_served
        _on_served = mark


def mark_served() -> None:
    """Tell the supervisor (if any) that this process has served; only the first call writes."""
    global _on_served
    mark, _on_served = _on_served, None
    if mark is not None:
        mark()
