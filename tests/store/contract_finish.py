"""Store contract for recording outcomes (``finish_many``; mixed into StoreContract).

``finish_many(outcomes)`` records any mix of succeeded, scheduled and dead outcomes together,
each row fenced on its own ``(id, lease_token, state = 'leased')``; a job whose cancel was
requested while it ran ends cancelled; a lease no longer held is absent from the result and its
row is unchanged. The reaper's and the hand-back's default decision is ``retries.decide``'s.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone

import pytest

from jobqueue.errors import LeaseLost
from jobqueue.retries import RunOutcome
from jobqueue.states import DeadReason, JobState
from jobqueue.store.interface import HandBack
from tests.factories import ack, nack

# datetime.UTC is Python 3.11+; jobqueue supports 3.10.
UTC = timezone.utc

RETRY_AT = datetime(2031, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)


class FinishContract:
    """Needs the host contract's ``make``, ``row``, ``now`` and ``store`` fixture."""

    def test_finish_many_records_a_mix_of_outcomes_each_fenced_on_its_own_lease(self, store):
        names = ("ok", "later", "exact", "dead", "cancel", "stolen")
        ids = {name: self.make().id for name in names}
        held = {j.id: j for j in store.claim(["q"], "w1", len(names), 30.0)}
        token = {job_id: claimed.lease_token for job_id, claimed in held.items()}
        assert store.cancel_or_request(ids["cancel"]) == JobState.LEASED
        # "stolen" went back to the queue and another worker holds it now: w1's token is stale.
        store.release(ids["stolen"], token[ids["stolen"]])
        [thief] = store.claim(["q"], "w2", 1, 30.0)
        assert thief.id == ids["stolen"]
        snapshot = self.row(ids["stolen"])
        dead_run_at = self.row(ids["dead"])["run_at"]

        before = self.now()
        recorded = store.finish_many(self._outcomes(token, ids))
        after = self.now()

        assert recorded == {
            ids["ok"]: JobState.SUCCEEDED,
            ids["later"]: JobState.SCHEDULED,
            ids["exact"]: JobState.SCHEDULED,
            ids["dead"]: JobState.DEAD,
            ids["cancel"]: JobState.CANCELLED,
        }
        rows = {name: self.row(job_id) for name, job_id in ids.items()}
        for name in ("ok", "later", "exact", "dead", "cancel"):
            row = rows[name]
            assert (row["lease_token"], row["lease_until"], row["attempts"]) == (None, None, 1)

        ok = rows["ok"]
        assert (ok["state"], ok["result"], ok["errors"], ok["dead_reason"]) == (
            JobState.SUCCEEDED,
            {"n": [1, "x"]},
            [],
            "",
        )
        assert ok["finished_at"] is not None

        later = rows["later"]
        assert later["state"] == JobState.SCHEDULED
        assert before + timedelta(seconds=5) <= later["run_at"] <= after + timedelta(seconds=5)
        assert (later["finished_at"], later["dead_reason"], later["result"]) == (None, "", None)
        [entry] = later["errors"]
        assert (entry["kind"], entry["attempt"], entry["message"]) == ("error", 1, "m")
        assert isinstance(entry["at"], str)

        exact = rows["exact"]
        assert (exact["state"], exact["run_at"]) == (JobState.SCHEDULED, RETRY_AT)
        assert [e["message"] for e in exact["errors"]] == ["later"]

        dead = rows["dead"]
        assert (dead["state"], dead["dead_reason"], dead["run_at"]) == (
            JobState.DEAD,
            DeadReason.PERMANENT_ERROR,
            dead_run_at,
        )
        assert dead["finished_at"] is not None
        assert [e["message"] for e in dead["errors"]] == ["never"]

        cancel = rows["cancel"]
        assert (cancel["state"], cancel["result"], cancel["dead_reason"]) == (
            JobState.CANCELLED,
            "done",
            "",
        )
        assert cancel["finished_at"] is not None
        # Who asked (the operator's entry), then how it ended.
        asked, entry = cancel["errors"]
        assert (asked["kind"], asked["previous_state"]) == ("operator_cancel", "leased")
        assert (entry["kind"], entry["attempt"], entry["worker"]) == ("cancelled", 1, "w1")
        assert "completed" in entry["message"]

        assert rows["stolen"] == snapshot
        assert (snapshot["state"], snapshot["lease_token"]) == (JobState.LEASED, thief.lease_token)
        # Nothing finished is claimed again; the thief still finishes its own run.
        assert store.claim(["q"], "w3", 10, 30.0) == []
        assert ack(store, thief.id, thief.lease_token, "null") == JobState.SUCCEEDED

    def _outcomes(self, token: dict[int, uuid.UUID], ids: dict[str, int]) -> list[RunOutcome]:
        error = {"kind": "error", "attempt": 1, "type": "ValueError", "message": "m"}
        return [
            RunOutcome(
                job_id=ids["dead"],
                lease_token=token[ids["dead"]],
                state=JobState.DEAD,
                error={**error, "message": "never"},
                dead_reason=DeadReason.PERMANENT_ERROR,
            ),
            RunOutcome(
                job_id=ids["ok"],
                lease_token=token[ids["ok"]],
                state=JobState.SUCCEEDED,
                result_json='{"n":[1,"x"]}',
            ),
            RunOutcome(
                job_id=ids["later"],
                lease_token=token[ids["later"]],
                state=JobState.SCHEDULED,
                error=error,
                delay_s=5.0,
            ),
            RunOutcome(
                job_id=ids["exact"],
                lease_token=token[ids["exact"]],
                state=JobState.SCHEDULED,
                error={**error, "message": "later"},
                retry_at=RETRY_AT,
                delay_s=99.0,
            ),
            RunOutcome(
                job_id=ids["cancel"],
                lease_token=token[ids["cancel"]],
                state=JobState.SUCCEEDED,
                result_json='"done"',
            ),
            RunOutcome(
                job_id=ids["stolen"],
                lease_token=token[ids["stolen"]],
                state=JobState.SUCCEEDED,
                result_json='"zombie"',
            ),
        ]

    def test_finish_many_empty_and_repeated_batches(self, store):
        assert store.finish_many([]) == {}
        job_id = self.make().id
        [claimed] = store.claim(["q"], "w1", 1, 30.0)
        outcome = RunOutcome(
            job_id=job_id, lease_token=claimed.lease_token, state=JobState.SUCCEEDED
        )
        assert store.finish_many([outcome]) == {job_id: JobState.SUCCEEDED}
        snapshot = self.row(job_id)
        # The same outcome again: its lease is no longer held.
        assert store.finish_many([outcome]) == {}
        assert self.row(job_id) == snapshot
        assert snapshot["result"] is None  # result_json "null": JSON null

    @pytest.mark.parametrize("state", [JobState.SCHEDULED, JobState.DEAD])
    def test_finish_many_of_a_failure_whose_cancel_was_requested_ends_it_cancelled(
        self, store, state
    ):
        job_id = self.make().id
        [claimed] = store.claim(["q"], "w1", 1, 30.0)
        assert store.cancel_or_request(job_id) == JobState.LEASED
        outcome = RunOutcome(
            job_id=job_id,
            lease_token=claimed.lease_token,
            state=state,
            error={"kind": "error", "message": "x"},
            dead_reason=DeadReason.PERMANENT_ERROR if state == JobState.DEAD else None,
            delay_s=60.0,
        )
        assert store.finish_many([outcome]) == {job_id: JobState.CANCELLED}
        row = self.row(job_id)
        assert (row["state"], row["dead_reason"], row["attempts"]) == (JobState.CANCELLED, "", 1)
        assert row["finished_at"] is not None
        assert row["lease_token"] is row["lease_until"] is None
        # The request, then the failure: no "handler completed" entry for a failed run.
        assert [e["message"] for e in row["errors"]] == ["cancel requested by operator", "x"]

    def test_reap_without_a_decision_uses_the_retry_rule(self, store):
        spent = self.make(max_attempts=1).id
        left = self.make(max_attempts=2).id
        store.claim(["q"], "w1", 2, 1.0)
        later = self.now() + timedelta(minutes=1)
        assert store.reap(now=later) == (1, 1)
        assert (self.row(spent)["state"], self.row(spent)["dead_reason"]) == (
            JobState.DEAD,
            DeadReason.ATTEMPTS_EXHAUSTED,
        )
        row = self.row(left)
        # JOBQUEUE["BACKOFF"] (full jitter, base 1 s): the first retry waits 0..1 s.
        assert row["state"] == JobState.SCHEDULED
        assert later <= row["run_at"] <= later + timedelta(seconds=1)

    def test_reap_records_a_lease_expired_entry_naming_the_lease_end(self, store):
        job_id = self.make().id
        [claimed] = store.claim(["q"], "w1", 1, 1.0)
        later = self.now() + timedelta(minutes=1)
        assert store.reap(now=later) == (1, 0)
        [entry] = self.row(job_id)["errors"]
        assert {k: entry[k] for k in ("kind", "attempt", "worker", "type")} == {
            "kind": "lease_expired",
            "attempt": 1,
            "worker": "w1",
            "type": "LeaseExpired",
        }
        assert entry["message"] == (
            f"lease expired at {claimed.lease_until.isoformat()} without an ack: worker w1 "
            "stopped renewing it (its process died or froze)"
        )
        assert datetime.fromisoformat(entry["at"]) == later

    def test_hand_back_without_a_decision_uses_the_retry_rule(self, store):
        spent = self.make(max_attempts=1).id
        store.claim(["q"], "dead-a", 1, 30.0)
        assert store.hand_back("dead-a") == HandBack(dead=1)
        assert self.row(spent)["dead_reason"] == DeadReason.ATTEMPTS_EXHAUSTED
        left = self.make(max_attempts=2).id
        store.claim(["q"], "dead-b", 1, 30.0)
        assert store.hand_back("dead-b") == HandBack(retried=1)
        assert self.row(left)["state"] == JobState.SCHEDULED

    def test_ack_and_nack_are_finish_many_of_one_and_raise_lease_lost(self, store):
        job_id = self.make().id
        [claimed] = store.claim(["q"], "w1", 1, 30.0)
        assert ack(store, job_id, claimed.lease_token, "1") == JobState.SUCCEEDED
        with pytest.raises(LeaseLost):
            ack(store, job_id, claimed.lease_token, "1")
        with pytest.raises(LeaseLost):
            nack(store, job_id, claimed.lease_token, {}, dead_reason=None)
