"""Pruning takes the parent links of the jobs it deletes and the batches it empties with them.

A link (``JobParent``) goes with its child, not its parent: a child still waiting reads its
parents' results through its links when it is released. A batch row goes once it is done and its
last member is pruned (the callbacks carry their counts in their own payload).
"""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from jobqueue.maintenance.pruning import prune_jobs
from jobqueue.models import Batch, Job, JobParent
from jobqueue.states import JobState
from jobqueue.store import bounded
from tests.conftest import requires_postgres
from tests.factories import make_job

DAY = timedelta(days=1)
WEEK = 7 * 86400.0


def old(state: str = JobState.SUCCEEDED, **fields) -> Job:
    return make_job(state, finished_at=timezone.now() - 8 * DAY, **fields)


def young(state: str = JobState.SUCCEEDED, **fields) -> Job:
    return make_job(state, finished_at=timezone.now() - DAY, **fields)


def link(parent: Job, child: Job, counted: bool = True) -> JobParent:
    return JobParent.objects.create(parent_id=parent.id, child_id=child.id, counted=counted)


def done_batch(members: int) -> Batch:
    return Batch.objects.create(
        total=members, pending=0, succeeded=members, completions=1, completed_at=timezone.now()
    )


def links() -> set[tuple[int, int]]:
    return set(JobParent.objects.values_list("parent_id", "child_id"))


@pytest.mark.django_db
def test_a_pruned_jobs_links_as_a_child_go_with_it_and_a_live_childs_links_stay():
    parent, child = old(has_children=True), old()
    waiting = make_job(JobState.WAITING)  # waits for `parent` and `slow`: released later
    slow = make_job(JobState.LEASED, has_children=True)
    young_child = young()
    link(parent, child)
    link(parent, waiting)
    link(slow, waiting, counted=False)
    link(parent, young_child)
    assert prune_jobs(["succeeded"], WEEK) == 2  # parent and child
    # The child's link went with it; the waiting child keeps both of its links (it reads its
    # parents' results through them, in order, when `slow` succeeds), and so does the young one.
    assert links() == {(parent.id, waiting.id), (slow.id, waiting.id), (parent.id, young_child.id)}
    young_child.finished_at = timezone.now() - 8 * DAY
    young_child.save(update_fields=["finished_at"])
    assert prune_jobs(["succeeded"], WEEK) == 1
    assert links() == {(parent.id, waiting.id), (slow.id, waiting.id)}


@pytest.mark.django_db
def test_a_done_batch_goes_with_its_last_member_and_not_before():
    emptied, half = done_batch(2), done_batch(2)
    open_batch = Batch.objects.create(total=1, pending=1)
    a, b = old(batch_id=emptied.id), old(batch_id=emptied.id)
    old(batch_id=half.id)
    kept = young(batch_id=half.id)
    make_job(JobState.READY, batch_id=open_batch.id)
    # One member a batch: the batch goes with the pass that deletes its last member.
    assert prune_jobs(["succeeded"], WEEK, batch_size=1, max_batches=1) == 1
    assert Batch.objects.filter(id=emptied.id).exists()
    assert prune_jobs(["succeeded"], WEEK, batch_size=1) == 2
    assert not Job.objects.filter(id__in=[a.id, b.id]).exists()
    assert set(Batch.objects.values_list("id", flat=True)) == {half.id, open_batch.id}
    kept.finished_at = timezone.now() - 8 * DAY
    kept.save(update_fields=["finished_at"])
    assert prune_jobs(["succeeded"], WEEK) == 1
    assert set(Batch.objects.values_list("id", flat=True)) == {open_batch.id}


@pytest.mark.django_db
def test_a_batch_whose_members_finished_but_was_never_completed_is_kept():
    # pending 0 but no completion recorded: not "done", so the row stays for an operator to see.
    odd = Batch.objects.create(total=1, pending=0, succeeded=1, completions=0)
    old(batch_id=odd.id)
    assert prune_jobs(["succeeded"], WEEK) == 1
    assert Batch.objects.filter(id=odd.id).exists()


@requires_postgres()
@pytest.mark.django_db(transaction=True)
def test_two_pruners_deleting_a_batchs_last_members_at_once_still_delete_it():
    batch = done_batch(2)
    first, second = old(batch_id=batch.id), old(batch_id=batch.id)
    # Pruner A deletes `first` and stalls before committing; meanwhile B deletes `second`,
    # commits, and checks the batch: A's member is still there (uncommitted), so B keeps it.
    # A then commits and checks in a statement of its own, which sees both gone.
    deleted_by_a = threading.Event()
    b_done = threading.Event()
    results: dict[str, object] = {}

    def stall(alias: str) -> None:
        if threading.current_thread().name == "pruner-a":
            deleted_by_a.set()
            assert b_done.wait(300), "pruner B never finished"

    def run(name: str) -> None:
        try:
            results[name] = prune_jobs(["succeeded"], WEEK, batch_size=1, max_batches=1)
        except Exception as exc:  # noqa: BLE001  (compared below, in the test's thread)
            results[name] = exc
        finally:
            connection.close()

    # A takes the oldest, `first`; B skips its locked row and takes `second`.
    Job.objects.filter(id=second.id).update(finished_at=timezone.now() - 7.5 * DAY)
    bounded.HOOKS["pruner"] = stall
    try:
        a = threading.Thread(target=run, args=("a",), name="pruner-a")
        a.start()
        assert deleted_by_a.wait(300), "pruner A never deleted"
        run("b")
        assert Batch.objects.filter(id=batch.id).exists()  # B could not see A's delete yet
        b_done.set()
        a.join(300)
        assert not a.is_alive()
    finally:
        bounded.HOOKS.pop("pruner", None)
        b_done.set()
    assert results == {"a": 1, "b": 1}
    assert not Job.objects.filter(id__in=[first.id, second.id]).exists()
    assert not Batch.objects.filter(id=batch.id).exists()
