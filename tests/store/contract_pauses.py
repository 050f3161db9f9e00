"""A part of the store contract, mixed into ``StoreContract`` (test_contract.py).

Moved from ``tests/limits/test_pauses.py``, where it had its own pair of store subclasses.
"""

from __future__ import annotations

from typing import Any

import pytest

import jobqueue
from jobqueue.errors import InvalidJobOption
from jobqueue.models import Job, Pause
from jobqueue.states import JobState
from tests.factories import make_job

NOOP = "tests.testapp.jobs.noop"


OTHER = "tests.testapp.jobs.add"


class PauseContract:
    """Needs ``alias``; the store under test is ``get_store(alias)``."""

    def pause_make(self, queue: str = "q", job_type: str = NOOP) -> int:
        return make_job(JobState.READY, using=self.alias, queue=queue, type=job_type).id

    def claim_all(self, store: Any, queues: list[str]) -> set[int]:
        return {j.id for j in store.claim(queues, "w1", 100, 30.0)}

    def test_a_paused_queue_gives_nothing_and_other_queues_are_still_claimed(self, store):
        paused_job = self.pause_make("mail")
        other_job = self.pause_make("q")
        paused, created = store.pause("queue", "mail", "alice", "smtp down")
        assert created is True
        assert (paused.kind, paused.name, paused.paused_by, paused.reason) == (
            "queue",
            "mail",
            "alice",
            "smtp down",
        )
        assert self.claim_all(store, ["mail", "q"]) == {other_job}
        assert self.claim_all(store, ["mail"]) == set()
        assert Job.objects.using(self.alias).get(id=paused_job).state == JobState.READY

    def test_resume_makes_the_queue_claimable_again(self, store):
        job_id = self.pause_make("mail")
        store.pause("queue", "mail", "alice")
        assert self.claim_all(store, ["mail"]) == set()
        lifted = store.resume("queue", "mail")
        assert lifted is not None and lifted.paused_by == "alice"
        assert self.claim_all(store, ["mail"]) == {job_id}
        assert store.paused() == []

    def test_a_paused_type_gives_nothing_in_any_queue_and_other_types_are_claimed(self, store):
        a = self.pause_make("q", NOOP)
        b = self.pause_make("r", NOOP)
        other = self.pause_make("q", OTHER)
        store.pause("type", NOOP, "bob")
        assert self.claim_all(store, ["q", "r"]) == {other}
        assert store.resume("type", NOOP) is not None
        assert self.claim_all(store, ["q", "r"]) == {a, b}

    def test_a_queue_and_a_type_of_the_same_name_are_separate_pauses(self, store):
        job_id = self.pause_make("q", "q")
        store.pause("type", "q", "bob")
        assert store.resume("queue", "q") is None
        assert self.claim_all(store, ["q"]) == set()
        store.resume("type", "q")
        assert self.claim_all(store, ["q"]) == {job_id}

    def test_enqueue_keeps_working_while_paused(self, store):
        store.pause("queue", "mail", "alice")
        job_id = jobqueue.enqueue("mail", NOOP, {"n": 1}, using=self.alias)
        row = Job.objects.using(self.alias).get(id=job_id)
        assert row.state == JobState.READY
        assert self.claim_all(store, ["mail"]) == set()

    def test_pausing_twice_keeps_the_first_pause(self, store):
        first, created = store.pause("queue", "mail", "alice", "first")
        again, created_again = store.pause("queue", "mail", "bob", "second")
        assert (created, created_again) == (True, False)
        assert again == first
        assert [(p.name, p.paused_by, p.reason) for p in store.paused()] == [
            ("mail", "alice", "first")
        ]

    def test_resuming_what_is_not_paused_changes_nothing(self, store):
        assert store.resume("queue", "mail") is None
        assert store.resume("type", NOOP) is None

    def test_the_api_pauses_and_resumes_queues_and_types_and_says_what_it_did(self):
        using = self.alias
        assert jobqueue.pause("mail", by="ops", reason="maintenance", using=using) is True
        assert jobqueue.pause("mail", by="other", using=using) is False
        assert jobqueue.pause_type(NOOP, by="ops", using=using) is True
        [queue_pause, type_pause] = jobqueue.paused(using=using)
        assert (queue_pause.kind, queue_pause.name, queue_pause.paused_by) == (
            "queue",
            "mail",
            "ops",
        )
        assert (type_pause.kind, type_pause.name) == ("type", NOOP)
        assert queue_pause.paused_at is not None
        assert jobqueue.resume("mail", using=using) is True
        assert jobqueue.resume("mail", using=using) is False
        assert jobqueue.resume_type(NOOP, using=using) is True
        assert jobqueue.resume_type(NOOP, using=using) is False
        assert jobqueue.paused(using=using) == []

    @pytest.mark.parametrize("bad", ["", "has space", "x" * 101, "semi;colon", None, 3])
    def test_the_api_refuses_a_bad_queue_name_and_writes_nothing(self, bad):
        with pytest.raises(InvalidJobOption, match="queue"):
            jobqueue.pause(bad, using=self.alias)
        with pytest.raises(InvalidJobOption, match="queue"):
            jobqueue.resume(bad, using=self.alias)
        assert not Pause.objects.using(self.alias).exists()

    @pytest.mark.parametrize("bad", ["", "has space", "x" * 201, "nul\x00", None])
    def test_the_api_refuses_a_bad_type_name_and_writes_nothing(self, bad):
        with pytest.raises(InvalidJobOption, match="job_type"):
            jobqueue.pause_type(bad, using=self.alias)
        assert not Pause.objects.using(self.alias).exists()
