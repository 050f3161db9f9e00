"""A part of the store contract, mixed into ``StoreContract`` (test_contract.py).

Moved from ``tests/flows/test_dependencies.py``, where it had its own pair of store subclasses.
"""

from __future__ import annotations

import pytest

import jobqueue
from jobqueue.errors import InvalidJobOption
from jobqueue.models import Job, JobParent
from jobqueue.retries import RunOutcome
from jobqueue.states import DeadReason, JobState
from jobqueue.store.finishing import ack_outcome
from tests.testapp import jobs

#: These tests commit (the store's own transactions are under test).
TRANSACTIONAL = pytest.mark.django_db(databases=["default", "sqlite"], transaction=True)


def state_of(job_id: int, alias: str) -> str:
    return Job.objects.using(alias).get(id=job_id).state


class ParentsContract:
    """Needs ``alias``; the store under test is ``get_store(alias)``."""

    def parents_enqueue(self, queue: str, **options) -> int:
        payload = options.pop("payload", {})
        job_type = options.pop("job_type", jobs.noop)
        return jobqueue.enqueue(queue, job_type, payload, using=self.alias, **options)

    def parents_claim(self, store, queue: str, n: int = 10):
        return store.claim([queue], "w1", n, 30.0)

    def parents_ack(self, store, claimed, result: str = "null") -> None:
        recorded = store.finish_many([ack_outcome(claimed.id, claimed.lease_token, result)])
        assert recorded == {claimed.id: JobState.SUCCEEDED}

    def kill(self, store, claimed) -> None:
        dead = RunOutcome(
            job_id=claimed.id,
            lease_token=claimed.lease_token,
            state=JobState.DEAD,
            error={"type": "ValueError", "message": "bad row", "attempt": claimed.attempt},
            dead_reason=DeadReason.PERMANENT_ERROR,
        )
        assert store.finish_many([dead]) == {claimed.id: JobState.DEAD}

    @TRANSACTIONAL
    def test_a_child_keeps_its_concurrency_key_and_limit(self, store):
        """enqueue(after=..., concurrency_key=..., concurrency_limit=...) stores both (they were
        dropped: the child ran unlimited)."""
        parent = self.parents_enqueue("p17")
        child = self.parents_enqueue(
            "p17", after=[parent], concurrency_key="smtp", concurrency_limit=2
        )
        row = Job.objects.using(self.alias).get(id=child)
        assert (row.concurrency_key, row.concurrency_limit) == ("smtp", 2)

    @TRANSACTIONAL
    def test_a_job_waits_unclaimed_until_its_parent_succeeds(self, store):
        parent = self.parents_enqueue("p1")
        child = self.parents_enqueue("p1", after=[parent])
        assert state_of(child, self.alias) == JobState.WAITING
        [claimed] = self.parents_claim(store, "p1")
        assert claimed.id == parent
        assert self.parents_claim(store, "p1") == [], "a waiting job was claimed"
        self.parents_ack(store, claimed)
        assert state_of(child, self.alias) == JobState.READY
        assert [c.id for c in self.parents_claim(store, "p1")] == [child]

    @TRANSACTIONAL
    def test_a_parent_that_already_succeeded_counts_as_done(self, store):
        parent = self.parents_enqueue("p2")
        [claimed] = self.parents_claim(store, "p2")
        self.parents_ack(store, claimed, '{"n": 1}')
        child = self.parents_enqueue("p2", after=[parent], takes_parent_results=True)
        row = Job.objects.using(self.alias).get(id=child)
        assert (row.state, row.waiting_for, row.payload) == (
            JobState.READY,
            0,
            {"parent_results": [{"n": 1}]},
        )

    @TRANSACTIONAL
    def test_an_unknown_parent_is_refused_and_nothing_is_written(self):
        parent = self.parents_enqueue("p3")
        jobs_before = Job.objects.using(self.alias).count()
        with pytest.raises(InvalidJobOption) as refused:
            self.parents_enqueue("p3", after=[parent, 987654321])
        assert refused.value.option == "after" and "987654321" in str(refused.value)
        assert Job.objects.using(self.alias).count() == jobs_before
        assert not JobParent.objects.using(self.alias).exists()
        assert not Job.objects.using(self.alias).get(id=parent).has_children

    @TRANSACTIONAL
    @pytest.mark.parametrize(
        ("after", "option"),
        [("12", "after"), ([], "after"), ([1, 1], "after"), ([0], "after"), ([True], "after")],
    )
    def test_bad_after_values_are_refused(self, after, option):
        with pytest.raises(InvalidJobOption) as refused:
            self.parents_enqueue("p4", after=after)
        assert refused.value.option == option
        with pytest.raises(InvalidJobOption) as refused:
            self.parents_enqueue("p4", run_on_parent_failure=True)
        assert refused.value.option == "run_on_parent_failure"
        assert not Job.objects.using(self.alias).filter(queue="p4").exists()

    @TRANSACTIONAL
    def test_fan_in_is_released_exactly_when_the_last_parent_succeeds(self, store):
        parents = [self.parents_enqueue("p5") for _ in range(3)]
        child = self.parents_enqueue(
            "p5",
            after=parents,
            takes_parent_results=True,
            job_type=jobs.record_parent_results,
            payload={"path": "/dev/null"},
        )
        claimed = sorted(self.parents_claim(store, "p5"), key=lambda c: c.id)
        assert [c.id for c in claimed] == parents
        for n, one in enumerate(reversed(claimed)):
            assert state_of(child, self.alias) == JobState.WAITING
            self.parents_ack(store, one, str(n))
        row = Job.objects.using(self.alias).get(id=child)
        assert (row.state, row.waiting_for) == (JobState.READY, 0)
        # In the order of after=, whatever order they finished in.
        assert row.payload["parent_results"] == [2, 1, 0]

    @TRANSACTIONAL
    def test_a_chain_of_three_whose_first_dies_is_cancelled_then_retried(self, store):
        ids = jobqueue.chain(
            jobqueue.step(jobs.noop, queue="p6"),
            jobs.noop.step(queue="p6"),
            jobqueue.step("tests.testapp.jobs.noop", {"x": 1}, queue="p6"),
            using=self.alias,
        )
        first, second, third = ids
        assert [state_of(i, self.alias) for i in ids] == ["ready", "waiting", "waiting"]
        [claimed] = self.parents_claim(store, "p6")
        self.kill(store, claimed)
        rows = {j.id: j for j in Job.objects.using(self.alias).filter(id__in=ids)}
        assert [rows[i].state for i in ids] == ["dead", "cancelled", "cancelled"]
        assert rows[second].errors[-1]["kind"] == "parent_failed"
        assert rows[second].errors[-1]["message"] == f"parent job #{first} ended dead"
        assert rows[third].errors[-1]["message"] == f"parent job #{second} ended cancelled"
        assert rows[third].finished_at is not None

        assert jobqueue.retry(first, using=self.alias)
        assert [state_of(i, self.alias) for i in ids] == ["ready", "waiting", "waiting"]
        for expected in ids:
            [claimed] = self.parents_claim(store, "p6")
            assert claimed.id == expected
            self.parents_ack(store, claimed)
        assert [state_of(i, self.alias) for i in ids] == ["succeeded"] * 3

    @TRANSACTIONAL
    def test_takes_parent_results_hands_each_step_the_previous_result(self, store):
        _, second = jobqueue.chain(
            jobqueue.step(jobs.add, {"a": 1, "b": 2}, queue="p7"),
            jobqueue.step(
                jobs.record_parent_results,
                {"path": "/dev/null"},
                queue="p7",
                takes_parent_results=True,
            ),
            using=self.alias,
        )
        [claimed] = self.parents_claim(store, "p7")
        self.parents_ack(store, claimed, "3")
        [claimed] = self.parents_claim(store, "p7")
        assert claimed.id == second
        assert claimed.payload == {"path": "/dev/null", "parent_results": [3]}

    @TRANSACTIONAL
    def test_a_child_that_runs_anyway_is_released_by_a_dead_parent(self, store):
        parent = self.parents_enqueue("p8")
        child = self.parents_enqueue("p8", after=[parent], run_on_parent_failure=True)
        [claimed] = self.parents_claim(store, "p8")
        self.kill(store, claimed)
        assert state_of(child, self.alias) == JobState.READY
        # A later retry and success of the parent does not count it twice.
        assert jobqueue.retry(parent, using=self.alias)
        [claimed] = self.parents_claim(store, "p8", n=1)
        assert claimed.id in (parent, child)

    @TRANSACTIONAL
    def test_cancelling_the_head_of_a_chain_cancels_what_has_not_run(self, store):
        ids = jobqueue.chain(*(jobs.noop.step(queue="p9") for _ in range(3)), using=self.alias)
        assert jobqueue.cancel(ids[1], using=self.alias), "a waiting job can be cancelled"
        assert [state_of(i, self.alias) for i in ids] == ["ready", "cancelled", "cancelled"]
        assert jobqueue.cancel(ids[0], using=self.alias)
        assert [state_of(i, self.alias) for i in ids] == ["cancelled"] * 3
        assert self.parents_claim(store, "p9") == []

    @TRANSACTIONAL
    def test_a_job_after_a_dead_parent_starts_cancelled(self, store):
        parent = self.parents_enqueue("p10")
        [claimed] = self.parents_claim(store, "p10")
        self.kill(store, claimed)
        child = self.parents_enqueue("p10", after=[parent])
        row = Job.objects.using(self.alias).get(id=child)
        assert row.state == JobState.CANCELLED
        assert row.errors[-1]["message"] == f"parent job #{parent} ended dead"
        assert jobqueue.retry(parent, using=self.alias)
        assert state_of(child, self.alias) == JobState.WAITING

    @TRANSACTIONAL
    def test_enqueue_many_takes_after_per_job_all_or_nothing(self, store):
        parent = self.parents_enqueue("p15")
        ids = jobqueue.enqueue_many(
            [
                {"queue": "p15", "job_type": jobs.noop},
                {"queue": "p15", "job_type": jobs.noop, "after": [parent]},
                {
                    "queue": "p15",
                    "job_type": jobs.record_parent_results,
                    "payload": {"path": "/dev/null"},
                    "after": [parent],
                    "takes_parent_results": True,
                },
            ],
            using=self.alias,
        )
        assert [state_of(i, self.alias) for i in ids] == ["ready", "waiting", "waiting"]
        jobs_before = Job.objects.using(self.alias).count()
        with pytest.raises(InvalidJobOption) as refused:
            jobqueue.enqueue_many(
                [
                    {"queue": "p15", "job_type": jobs.noop},
                    {"queue": "p15", "job_type": jobs.noop, "after": [987654321]},
                ],
                using=self.alias,
            )
        assert refused.value.option == "after"
        with pytest.raises(InvalidJobOption) as refused:
            jobqueue.enqueue_many(
                [{"queue": "p15", "job_type": jobs.noop, "after": "1"}], using=self.alias
            )
        assert refused.value.option == "jobs[0].after"
        assert Job.objects.using(self.alias).count() == jobs_before

    @TRANSACTIONAL
    def test_a_parent_that_succeeds_while_its_child_is_cancelled_still_counts(self, store):
        first, second = self.parents_enqueue("p16"), self.parents_enqueue("p16")
        child = self.parents_enqueue("p16", after=[first, second])
        claimed = {c.id: c for c in self.parents_claim(store, "p16")}
        self.kill(store, claimed[second])
        assert state_of(child, self.alias) == JobState.CANCELLED
        self.parents_ack(store, claimed[first])
        assert jobqueue.retry(second, using=self.alias)
        assert state_of(child, self.alias) == JobState.WAITING
        [again] = self.parents_claim(store, "p16")
        self.parents_ack(store, again)
        row = Job.objects.using(self.alias).get(id=child)
        assert (row.state, row.waiting_for) == (JobState.READY, 0)

    @TRANSACTIONAL
    def test_a_chain_with_a_bad_step_writes_nothing(self):
        with pytest.raises(InvalidJobOption) as refused:
            jobqueue.chain(
                jobs.noop.step(queue="p11"), jobs.noop.step(queue="bad queue"), using=self.alias
            )
        assert refused.value.option == "steps[1].queue"
        assert not Job.objects.using(self.alias).filter(queue="p11").exists()
