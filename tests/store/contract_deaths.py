"""Store contract for a worker process's death (``hand_back``; mixed into StoreContract).

``hand_back(worker_id, decide)``: the one job of a dead process is charged (retried or dead, by
``decide``); the jobs of a process that held several are refunded, made ready and suspect.
Jobs of other workers are untouched; a job released with ``message`` says so.
"""

from __future__ import annotations

import functools

import pytest

from jobqueue.errors import LeaseLost
from jobqueue.models import Job
from jobqueue.retries import Backoff
from jobqueue.states import DeadReason, JobState
from jobqueue.store.finishing import charge_expired
from jobqueue.store.interface import HandBack
from tests.factories import ack


def fixed_backoff(delay_s: float) -> Backoff:
    """Return a backoff policy whose every delay is ``delay_s`` seconds (no jitter)."""
    return Backoff(policy="none", base_seconds=delay_s, cap_seconds=delay_s)


def decide_retry_in(delay_s: float = 0.0):
    """The hand-back's own rule (``charge_expired``: ``retries.decide``) with a fixed backoff."""
    return functools.partial(charge_expired, backoff=fixed_backoff(delay_s))


class DeathContract:
    """Needs the host contract's ``make``, ``row`` and ``store`` fixture."""

    def test_hand_back_of_several_refunds_each_and_marks_it_suspect(self, store):
        ids = [self.make(max_attempts=2).id for _ in range(3)]
        bystander = self.make().id
        held = store.claim(["q"], "dead-w", 3, 30.0)
        [other] = store.claim(["q"], "live-w", 1, 30.0)
        assert {j.id for j in held} == set(ids) and other.id == bystander
        assert not any(j.suspect for j in held)

        done = store.hand_back("dead-w", decide_retry_in(60.0))

        assert done == HandBack(refunded=3)
        for job_id in ids:
            row = self.row(job_id)
            assert (row["state"], row["attempts"], row["suspect"]) == (JobState.READY, 0, True)
            assert row["lease_token"] is row["lease_until"] is row["finished_at"] is None
            [entry] = row["errors"]
            assert (entry["kind"], entry["attempt"], entry["charged"]) == ("process_died", 1, False)
            assert entry["worker"] == "dead-w"
        assert self.row(bystander)["state"] == JobState.LEASED
        with pytest.raises(LeaseLost):
            ack(store, held[0].id, held[0].lease_token, "null")
        again = store.claim(["q"], "w2", 3, 30.0)
        assert {(j.id, j.attempt, j.suspect) for j in again} == {(i, 1, True) for i in ids}

    def test_hand_back_of_one_charges_it_retried_or_dead(self, store):
        left = self.make(max_attempts=2).id
        [first] = store.claim(["q"], "dead-a", 1, 30.0)
        assert store.hand_back("dead-a", decide_retry_in(60.0)) == HandBack(retried=1)
        row = self.row(left)
        assert (row["state"], row["attempts"], row["suspect"]) == (JobState.SCHEDULED, 1, False)
        assert row["run_at"] > first.lease_until  # 60 s backoff, past the 30 s lease
        [entry] = row["errors"]
        assert (entry["kind"], entry["charged"]) == ("process_died", True)

        spent = self.make(max_attempts=1).id
        store.claim(["q"], "dead-b", 1, 30.0)
        assert store.hand_back("dead-b", decide_retry_in(60.0)) == HandBack(dead=1)
        row = self.row(spent)
        assert (row["state"], row["dead_reason"], row["attempts"]) == (
            JobState.DEAD,
            DeadReason.ATTEMPTS_EXHAUSTED,
            1,
        )
        assert row["finished_at"] is not None

    def test_hand_back_says_how_the_process_died_in_each_jobs_last_error(self, store):
        alone = self.make().id
        store.claim(["q"], "dead-a", 1, 30.0)
        store.hand_back("dead-a", decide_retry_in(60.0), cause="SIGKILL")
        pair = [self.make().id for _ in range(2)]
        store.claim(["q"], "dead-b", 2, 30.0)
        store.hand_back("dead-b", decide_retry_in(60.0), cause="exit status 3")
        jobs = Job.objects.using(self.alias)
        last = jobs.get(id=alone).last_error
        assert last is not None and (last["kind"], last["worker"]) == ("process_died", "dead-a")
        assert last["message"] == (
            "its worker process was killed by SIGKILL while running it alone; the attempt counts"
        )
        for job_id in pair:
            last = jobs.get(id=job_id).last_error
            assert last is not None and last["worker"] == "dead-b"
            assert last["message"].startswith(
                "its worker process exited with status 3 while running 2 jobs;"
            )

    def test_hand_back_of_a_worker_without_leases_changes_nothing(self, store):
        job_id = self.make().id
        store.claim(["q"], "live-w", 1, 30.0)
        assert store.hand_back("nobody", decide_retry_in(1.0)) == HandBack()
        assert self.row(job_id)["state"] == JobState.LEASED

    def test_hand_back_ends_a_job_whose_cancel_was_requested_cancelled(self, store):
        ids = [self.make().id for _ in range(2)]
        store.claim(["q"], "dead-w", 2, 30.0)
        store.cancel_or_request(ids[0])
        assert store.hand_back("dead-w", decide_retry_in(1.0)) == HandBack(refunded=1, cancelled=1)
        assert self.row(ids[0])["state"] == JobState.CANCELLED
        assert self.row(ids[1])["state"] == JobState.READY

    def test_release_records_the_message_given(self, store):
        job_id = self.make().id
        [claimed] = store.claim(["q"], "w1", 1, 30.0)
        store.release(job_id, claimed.lease_token, message="given back unstarted")
        [entry] = self.row(job_id)["errors"]
        assert (entry["kind"], entry["message"]) == ("released", "given back unstarted")
        assert self.row(job_id)["attempts"] == 0
