"""Internal: the parents part of the store seam: jobs that run after other jobs.

One part of the composite :class:`~jobqueue.store.protocol.Store`. The PostgreSQL store keeps it
in ``postgres_parents.py`` (and migration 0015_parents's trigger), the generic store in
``generic_parents.py``. The rules, the same on both:

* ``enqueue_after`` locks the parents in id order, flags them ``has_children`` and reads their
  states, in the caller's transaction. A parent that already succeeded counts as done. If any
  parent is dead or cancelled (and the child does not run anyway), the child is inserted
  ``cancelled`` with a ``parent_failed`` entry; else, if some parents have not succeeded, it is
  inserted ``waiting`` with ``waiting_for`` = how many; else ready (or scheduled) at once. One
  ``JobParent`` row per parent (``counted`` for those already done).
* When a parent with children succeeds (or fails, for a child that runs anyway), each uncounted
  edge is counted and its child's ``waiting_for`` goes down by one under the child's row lock;
  the one that reaches 0 makes it ready (``run_at`` no earlier than now), in the transaction
  that recorded the parent's outcome. A child ``takes_parent_results`` then gets the payload key
  :data:`PARENT_RESULTS_KEY`: its parents' results, in the order of ``after``.
* When a parent ends dead or cancelled, its waiting children end cancelled with a
  ``parent_failed`` entry naming it; their own children follow (transitive).
* When an operator retries a dead or cancelled parent, the children its failure cancelled (last
  entry ``parent_failed``) wait again with a ``parent_retried`` entry, unless another of their
  parents is still dead or cancelled; their own children follow.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from jobqueue.errors import InvalidJobOption
from jobqueue.states import JobState
from jobqueue.store.base import NewJob

__all__ = ["PARENT_RESULTS_KEY", "ParentStore", "Start", "failed_entry", "retried_entry", "start"]

#: The payload key a child enqueued with ``takes_parent_results=True`` gets its parents' results
#: under (a list, in the order of ``after``), when it is released.
PARENT_RESULTS_KEY = "parent_results"

#: The states of a parent that make its waiting children end cancelled.
FAILED = frozenset({JobState.DEAD, JobState.CANCELLED})


@dataclass(frozen=True, slots=True, kw_only=True)
class Start:
    """How a job enqueued after parents starts: the row's state and the edges' ``counted``.

    ``state`` None means ready or scheduled by its ``run_at``, as any new job.
    """

    state: str | None
    waiting_for: int
    counted: tuple[bool, ...]
    errors: tuple[dict[str, Any], ...]
    payload_json: str


def failed_entry(parent_id: int, parent_state: str, previous_state: str, at: datetime) -> dict:
    """Return the history entry of a child cancelled because ``parent_id`` ended dead/cancelled."""
    return {
        "kind": "parent_failed",
        "at": at.isoformat(),
        "parent": parent_id,
        "parent_state": parent_state,
        "previous_state": previous_state,
        "message": f"parent job #{parent_id} ended {parent_state}",
    }


def retried_entry(parent_id: int, at: datetime) -> dict:
    """Return the history entry of a child waiting again after its parent was retried."""
    return {
        "kind": "parent_retried",
        "at": at.isoformat(),
        "parent": parent_id,
        "previous_state": JobState.CANCELLED.value,
        "message": f"parent job #{parent_id} was retried; waiting again",
    }


def start(
    job: NewJob,
    after: Sequence[int],
    found: Mapping[int, tuple[str, Any]],
    *,
    run_on_parent_failure: bool,
    takes_parent_results: bool,
    now: datetime,
) -> Start:
    """Decide how a job enqueued after ``after`` starts, from its parents' (state, result).

    Raises:
        InvalidJobOption: a parent id names no job (``option`` is ``after``).
    """
    missing = [parent for parent in after if parent not in found]
    if missing:
        raise InvalidJobOption("after", f"no job has id {missing[0]} (parents must exist)")
    counted = tuple(
        found[p][0] == JobState.SUCCEEDED or (run_on_parent_failure and found[p][0] in FAILED)
        for p in after
    )
    failed = [
        p for p, done in zip(after, counted, strict=True) if found[p][0] in FAILED and not done
    ]
    payload_json = job.payload_json
    if failed:
        state: str | None = JobState.CANCELLED
        entry = failed_entry(failed[0], found[failed[0]][0], JobState.WAITING, now)
        return Start(
            state=state,
            waiting_for=counted.count(False),
            counted=counted,
            errors=(entry,),
            payload_json=payload_json,
        )
    waiting_for = counted.count(False)
    if waiting_for == 0 and takes_parent_results:
        payload = json.loads(payload_json)
        payload[PARENT_RESULTS_KEY] = [found[p][1] for p in after]
        payload_json = json.dumps(payload, separators=(",", ":"))
    return Start(
        state=JobState.WAITING if waiting_for else None,
        waiting_for=waiting_for,
        counted=counted,
        errors=(),
        payload_json=payload_json,
    )


class ParentStore(Protocol):
    """Jobs enqueued after other jobs."""

    def enqueue_after(
        self,
        job: NewJob,
        after: Sequence[int],
        *,
        run_on_parent_failure: bool = False,
        takes_parent_results: bool = False,
    ) -> tuple[int, datetime]:
        """Insert ``job`` to run once every job of ``after`` has succeeded; return id, created_at.

        In the caller's transaction (a savepoint in it, or one of its own): nothing is written
        when it raises. ``after`` holds distinct ids. The rules are this module's docstring's.

        Raises:
            InvalidJobOption: a parent id names no job (``option`` is ``after``).
        """
        ...

    def release_stranded(self, limit: int = 500) -> int:
        """Release ordering-key followers whose parent ended before their enqueue committed.

        Internal: every worker's reaper tick calls it. An ordering-key follower is linked to its
        key's last job without a lock (issue 33), so that job can end before the follower's
        transaction commits, unseen by the release that its end runs; this releases such a
        job (its key's first waiting one) as that release would have.

        Args:
            limit: most jobs released in one call.

        Returns:
            How many jobs were released (ready or scheduled).
        """
        ...
