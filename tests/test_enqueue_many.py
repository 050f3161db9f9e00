"""``jobqueue.enqueue_many``: validation first, one statement, ids in input order, dedupe keys.

Runs on the default database, PostgreSQL or SQLite.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import connection, transaction

import jobqueue
from jobqueue.errors import InvalidJobOption, InvalidPayload
from jobqueue.models import Job
from jobqueue.signals import job_enqueued
from jobqueue.states import JobState

NOOP = "tests.testapp.jobs.noop"
ADD = "tests.testapp.jobs.add"

pytestmark = pytest.mark.django_db(databases=["default", "sqlite"])


def test_ids_come_back_in_input_order_with_every_option_stored():
    run_at = datetime(2031, 1, 2, 3, 4, 5, tzinfo=UTC)
    ids = jobqueue.enqueue_many(
        [
            {"queue": "a", "job_type": ADD, "payload": {"a": 1, "b": 2}, "priority": 7},
            {"queue": "b", "job_type": NOOP, "run_at": run_at, "tenant_id": "t1"},
            {
                "queue": "a",
                "job_type": NOOP,
                "max_attempts": 2,
                "timeout_s": 4,
                "ordering_key": "o",
            },
        ]
    )
    assert len(ids) == 3
    rows = {r["id"]: r for r in Job.objects.values()}
    first, second, third = (rows[i] for i in ids)
    assert (first["queue"], first["type"], first["payload"], first["priority"]) == (
        "a",
        ADD,
        {"a": 1, "b": 2},
        7,
    )
    assert first["state"] == JobState.READY
    assert (second["state"], second["run_at"], second["tenant_id"]) == (
        JobState.SCHEDULED,
        run_at,
        "t1",
    )
    assert (third["max_attempts"], third["timeout_s"], third["ordering_key"]) == (2, 4.0, "o")
    assert first["ordering_key"] is None
    assert Job.objects.count() == 3


def test_a_bad_job_anywhere_writes_nothing_and_is_named_by_index():
    good = {"queue": "q", "job_type": NOOP}
    with pytest.raises(InvalidJobOption) as bad_priority:
        jobqueue.enqueue_many([good, good, {**good, "priority": 101}])
    assert bad_priority.value.option == "jobs[2].priority"
    assert "got 101" in str(bad_priority.value)
    with pytest.raises(InvalidPayload) as bad_payload:
        jobqueue.enqueue_many([good, {**good, "payload": {"x": {1, 2}}}])
    assert bad_payload.value.path.startswith("jobs[1].")
    with pytest.raises(InvalidJobOption, match=r"jobs\[0\]: unknown keys: colour"):
        jobqueue.enqueue_many([{**good, "colour": "red"}])
    with pytest.raises(InvalidJobOption, match=r"jobs\[1\]: needs job_type"):
        jobqueue.enqueue_many([good, {"queue": "q"}])
    with pytest.raises(InvalidJobOption, match=r"jobs\[0\]: must be a dict"):
        jobqueue.enqueue_many([("q", NOOP)])
    with pytest.raises(InvalidJobOption) as bad_queue:
        jobqueue.enqueue_many([{"queue": "no spaces", "job_type": NOOP}])
    assert bad_queue.value.option == "jobs[0].queue"
    with pytest.raises(InvalidPayload):
        jobqueue.enqueue_many([{"queue": "q", "job_type": ADD, "payload": {"a": 1, "c": 2}}])
    with pytest.raises(InvalidJobOption) as empty_key:
        jobqueue.enqueue_many([good, {**good, "ordering_key": ""}])
    assert empty_key.value.option == "jobs[1].ordering_key"
    assert Job.objects.count() == 0


def test_dedupe_keys_live_and_within_the_batch():
    live = jobqueue.enqueue("q", NOOP, {"v": 0}, dedupe_key="held")
    ids = jobqueue.enqueue_many(
        [
            {"queue": "q", "job_type": NOOP, "payload": {"v": 1}, "dedupe_key": "k"},
            {"queue": "q", "job_type": NOOP, "payload": {"v": 2}, "dedupe_key": "held"},
            {"queue": "q", "job_type": NOOP, "payload": {"v": 3}, "dedupe_key": "k"},
            {"queue": "r", "job_type": NOOP, "payload": {"v": 4}, "dedupe_key": "k"},
        ]
    )
    assert ids[1] == live
    assert ids[2] == ids[0]
    assert len({ids[0], ids[3], live}) == 3
    assert Job.objects.count() == 3
    assert Job.objects.get(id=ids[0]).payload == {"v": 1}
    assert Job.objects.get(id=live).payload == {"v": 0}


def test_an_empty_batch_writes_nothing_and_asks_nothing(django_assert_num_queries):
    with django_assert_num_queries(0):
        assert jobqueue.enqueue_many([]) == []
        assert jobqueue.enqueue_many(iter(())) == []


def test_job_enqueued_is_sent_once_per_new_row():
    seen: list[tuple[int, str]] = []

    def receiver(sender, job_id, queue, **kwargs):
        seen.append((job_id, queue))

    job_enqueued.connect(receiver)
    try:
        ids = jobqueue.enqueue_many(
            [
                {"queue": "q", "job_type": NOOP, "dedupe_key": "k"},
                {"queue": "q", "job_type": NOOP, "dedupe_key": "k"},
                {"queue": "r", "job_type": NOOP},
            ]
        )
    finally:
        job_enqueued.disconnect(receiver)
    assert seen == [(ids[0], "q"), (ids[2], "r")]


def test_it_joins_the_callers_transaction():
    class Rollback(Exception):
        pass

    with pytest.raises(Rollback):
        with transaction.atomic():
            jobqueue.enqueue_many([{"queue": "q", "job_type": NOOP}] * 3)
            raise Rollback
    assert Job.objects.count() == 0


@pytest.mark.skipif(
    "postgresql" not in connection.settings_dict["ENGINE"], reason="one statement on PostgreSQL"
)
def test_thousands_of_jobs_are_one_statement_on_postgresql(django_assert_num_queries):
    jobs = [{"queue": "q", "job_type": NOOP, "payload": {"i": i}} for i in range(3000)]
    with django_assert_num_queries(1):
        ids = jobqueue.enqueue_many(jobs)
    assert len(set(ids)) == 3000
    assert ids == sorted(ids)  # drawn from the sequence in input order
    payloads = dict(Job.objects.values_list("id", "payload"))
    assert [payloads[i] for i in ids] == [{"i": i} for i in range(3000)]
