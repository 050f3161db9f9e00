"""``jobqueue.enqueue_many``: validation first, one statement, ids in input order, dedupe keys.

Runs on the default database, PostgreSQL or SQLite.
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from django.db import connection, transaction

import jobqueue
from jobqueue.errors import InvalidJobOption, InvalidPayload
from jobqueue.models import Job
from jobqueue.signals import job_enqueued
from jobqueue.states import JobState

# datetime.UTC is Python 3.11+; jobqueue supports 3.10.
UTC = timezone.utc

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
    jobs = [
        {"queue": "q", "job_type": NOOP, "payload": {"i": i}, "dedupe_key": str(i)}
        for i in range(3000)
    ]
    with django_assert_num_queries(1):
        ids = jobqueue.enqueue_many(jobs)
    assert len(set(ids)) == 3000
    payloads = dict(Job.objects.values_list("id", "payload"))
    assert [payloads[i] for i in ids] == [{"i": i} for i in range(3000)]


@pytest.mark.skipif(
    "postgresql" not in connection.settings_dict["ENGINE"], reason="COPY on PostgreSQL"
)
def test_thousands_of_keyless_jobs_are_one_copy_after_one_statement(django_assert_num_queries):
    # Django sees the statement that draws the ids, not the COPY stream that follows it.
    jobs = [{"queue": "q", "job_type": NOOP, "payload": {"i": i}} for i in range(3000)]
    with django_assert_num_queries(1) as captured:
        ids = jobqueue.enqueue_many(jobs)
    [statement] = [q["sql"] for q in captured.captured_queries]
    assert "nextval" in statement and "jsonb_to_recordset" not in statement
    assert len(set(ids)) == 3000
    assert ids == sorted(ids)  # drawn from the sequence in input order
    payloads = dict(Job.objects.values_list("id", "payload"))
    assert [payloads[i] for i in ids] == [{"i": i} for i in range(3000)]


# -- large and concurrent batches (PostgreSQL) ---------------------------------------------------

on_postgres = pytest.mark.skipif(
    "postgresql" not in connection.settings_dict["ENGINE"], reason="PostgreSQL statements"
)


@on_postgres
def test_a_batch_is_cut_into_statements_bounded_in_bytes_with_ids_in_input_order():
    # 30 payloads of ~1 KB under a 4 KB bound: a few jobs per statement, plus one that draws
    # the ids; dedupe keys and ids as in one statement.
    jobs = [
        {"queue": "q", "job_type": NOOP, "payload": {"i": i, "pad": "x" * 1000}, "dedupe_key": k}
        for i, k in enumerate(["b", "a", None, "c", "a"] * 6)
    ]
    ids = jobqueue.enqueue_many(jobs, chunk_bytes=4096)
    assert len(ids) == 30
    created = sorted(set(ids))
    # One job per key (the first with it) and one per keyless job, in input order.
    firsts = {"b": ids[0], "a": ids[1], "c": ids[3]}
    assert [ids[i] for i in range(30) if jobs[i]["dedupe_key"]] == [
        firsts[j["dedupe_key"]] for j in jobs if j["dedupe_key"]
    ]
    assert created == [ids[0], ids[1], ids[2], ids[3], *[ids[i] for i in range(7, 30, 5)]]
    payloads = dict(Job.objects.values_list("id", "payload"))
    assert [payloads[i]["i"] for i in created] == [0, 1, 2, 3, 7, 12, 17, 22, 27]


@on_postgres
@pytest.mark.django_db(transaction=True)
def test_a_batch_of_several_statements_is_all_or_nothing():
    """A later statement fails (a real trigger refuses one job): no job of the batch is left,
    with or without a transaction of the caller's, and the caller's transaction stays usable."""
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE FUNCTION jq_refuse_boom() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "IF NEW.type = 'tests.boom' THEN RAISE EXCEPTION 'boom refused'; END IF; "
            "RETURN NEW; END $$"
        )
        cursor.execute(
            "CREATE TRIGGER jq_refuse_boom BEFORE INSERT ON jobqueue_job "
            "FOR EACH ROW EXECUTE FUNCTION jq_refuse_boom()"
        )
    try:
        jobs = [{"queue": "q", "job_type": NOOP, "payload": {"pad": "x" * 2000}}] * 10
        jobs = [*jobs, {"queue": "q", "job_type": "tests.boom", "payload": {}}]
        from django.db import DatabaseError

        with pytest.raises(DatabaseError, match="boom refused"):
            jobqueue.enqueue_many(jobs, chunk_bytes=4096)  # autocommit: no caller transaction
        assert Job.objects.count() == 0
        with transaction.atomic():
            kept = jobqueue.enqueue("q", NOOP, {})
            with pytest.raises(DatabaseError, match="boom refused"):
                jobqueue.enqueue_many(jobs, chunk_bytes=4096)
            assert list(Job.objects.values_list("id", flat=True)) == [kept]
        assert list(Job.objects.values_list("id", flat=True)) == [kept]
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TRIGGER jq_refuse_boom ON jobqueue_job")
            cursor.execute("DROP FUNCTION jq_refuse_boom()")


@on_postgres
def test_a_large_batch_uses_client_memory_near_its_size_not_several_times_it():
    """40 payloads of 256 KB (10 MB): the client's extra memory during the call stays near the
    batch's own JSON (which the validated jobs hold), not a multiple of it built as one message.
    Measured with tracemalloc (Python's allocations, where psycopg's bytes live too)."""
    import tracemalloc

    payloads = [{"blob": chr(65 + i % 26) * 256 * 1024} for i in range(40)]
    batch_bytes = sum(len(p["blob"]) for p in payloads)
    jobs = [{"queue": "q", "job_type": NOOP, "payload": p} for p in payloads]
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base, _ = tracemalloc.get_traced_memory()
        ids = jobqueue.enqueue_many(jobs, chunk_bytes=1024 * 1024)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(set(ids)) == 40
    # Before statements were bounded in bytes: about 4x the batch (the jobs' JSON, the pieces
    # of one message, the message, its encoding). Now the jobs' JSON plus a chunk or two.
    print(f"peak extra memory: {(peak - base) / batch_bytes:.2f} x the batch")
    assert peak - base < 1.8 * batch_bytes, (peak - base) / batch_bytes


def test_a_bad_chunk_bytes_is_refused_before_anything_is_written():
    with pytest.raises(InvalidJobOption, match="chunk_bytes"):
        jobqueue.enqueue_many([{"queue": "q", "job_type": NOOP}], chunk_bytes=0)
    assert Job.objects.count() == 0


def _deadlocks_of_concurrent_batches(threads: int, rounds: int, keys: int, chunk_bytes=None):
    """Run ``threads`` real sessions that each enqueue, per round, one batch of the round's
    ``keys`` dedupe keys in its own shuffled order, all starting together; return how many
    calls failed with ``deadlock detected`` and how many jobs each round made."""
    import random
    import threading

    from django.db import OperationalError, connections

    barrier = threading.Barrier(threads)
    deadlocks: list[int] = []
    errors: list[BaseException] = []

    def run(seed: int) -> None:
        rng = random.Random(seed)
        try:
            for r in range(rounds):
                batch = [
                    {"queue": "q", "job_type": NOOP, "dedupe_key": f"{r}:{k}", "payload": {}}
                    for k in range(keys)
                ]
                rng.shuffle(batch)
                barrier.wait(timeout=60)
                try:
                    jobqueue.enqueue_many(batch, chunk_bytes=chunk_bytes)
                except OperationalError as exc:
                    if getattr(exc.__cause__, "sqlstate", None) != "40P01":
                        raise
                    deadlocks.append(r)
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            errors.append(exc)
            barrier.abort()
        finally:
            connections.close_all()

    workers = [threading.Thread(target=run, args=(seed,)) for seed in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=300)
    assert not errors, errors
    per_round = Job.objects.values("dedupe_key").count()
    return len(deadlocks), per_round


@pytest.mark.slow  # a load: 8 sessions, 200 batches
@on_postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("chunk_bytes", [None, 2000], ids=["one statement", "several"])
def test_concurrent_batches_sharing_dedupe_keys_in_any_order_never_deadlock(chunk_bytes):
    """8 sessions, 25 rounds, 40 shared keys per round in shuffled orders (200 calls). Before
    the keys were taken in one order, a few percent of the calls died with a deadlock."""
    deadlocks, jobs = _deadlocks_of_concurrent_batches(8, 25, 40, chunk_bytes)
    assert deadlocks == 0
    assert jobs == 25 * 40  # every key became exactly one job


@pytest.mark.parametrize(
    ("option", "good", "bad"),
    [("priority", 1, True), ("max_attempts", 2, 2.0), ("max_attempts", 1, True)],
)
def test_a_bad_option_equal_to_a_good_one_is_still_refused(option, good, bad):
    # The checks of a type's options run once per distinct options in a batch: True == 1 and
    # 2.0 == 2, yet neither is accepted where an integer is due.
    jobs = [{"queue": "q", "job_type": NOOP, option: value} for value in (good, good, bad)]
    with pytest.raises(InvalidJobOption) as caught:
        jobqueue.enqueue_many(jobs)
    assert caught.value.option == f"jobs[2].{option}"
    assert not Job.objects.exists()


@pytest.mark.parametrize(
    ("payload", "path"),
    [
        ({"a": 1, "b\x00": 2}, r"jobs[1].payload['b\x00']"),
        ({"a": "x\x00"}, "jobs[1].payload['a']"),
        ({"a": "\udc00"}, "jobs[1].payload['a']"),
        ({"a": float("nan")}, "jobs[1].payload['a']"),
        ({"a": 10**5000}, "jobs[1].payload['a']"),
    ],
)
def test_a_flat_payload_is_refused_with_its_path(payload, path):
    jobs = [{"queue": "q", "job_type": NOOP, "payload": p} for p in ({"a": 1}, payload)]
    with pytest.raises(InvalidPayload) as caught:
        jobqueue.enqueue_many(jobs)
    assert caught.value.path == path
    assert not Job.objects.exists()


def test_a_flat_payload_that_only_looks_like_a_nul_is_accepted():
    [job_id] = jobqueue.enqueue_many(
        [{"queue": "q", "job_type": NOOP, "payload": {"a": "\\u0000"}}]
    )
    assert Job.objects.get(id=job_id).payload == {"a": "\\u0000"}
