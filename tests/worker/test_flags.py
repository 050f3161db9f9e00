"""``runworkers --queues '*'``, ``--exclude-queues`` and ``--max-tasks`` (issue 20, item 6).

In-process (``Worker.run_once``) on both stores where one pass shows the behaviour; real
``runworkers`` processes on PostgreSQL for what only a process shows: a queue first seen after
the worker started (woken by its notification, not by a poll), the exit status after
``--max-tasks``, and the supervisor replacing children that reached it.
"""

from __future__ import annotations

import signal
import uuid
from collections import Counter

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

import jobqueue
from jobqueue.limits.fairness import QueueSelector
from jobqueue.models import Job, Worker
from jobqueue.ops.queues import queue_status
from jobqueue.states import JobState
from jobqueue.store import get_store
from jobqueue.store.sqltext import sql
from jobqueue.worker.loop import Worker as QueueWorker
from tests.conftest import FAST_WORKER_SETTINGS, requires_postgres, wait_for
from tests.factories import job_kwargs, make_jobs
from tests.testapp import jobs

pytestmark = pytest.mark.django_db(databases=["default", "sqlite"], transaction=True)

NOOP = "tests.testapp.jobs.noop"
both_stores = pytest.mark.parametrize("using", ["default", "sqlite"])


def worker(using: str, queues: list[str], **options) -> QueueWorker:
    return QueueWorker(
        queues=queues, using=using, install_signal_handlers=False, listen_notify=False, **options
    )


def states(using: str, queue: str) -> Counter:
    return Counter(Job.objects.using(using).filter(queue=queue).values_list("state", flat=True))


# -- flags -----------------------------------------------------------------------------------

BAD = [
    (["--max-tasks", "0"], "argument --max-tasks: ", "got '0'"),
    (["--max-tasks", "-3"], "argument --max-tasks: ", "got '-3'"),
    (["--max-tasks", "x"], "argument --max-tasks: ", "got 'x'"),
    (["--queues", "*,*"], "argument --queues: ", "queue named twice"),
    (["--queues", "a,*,b"], "argument --queues: ", "'*' must be the last"),
    (["--queues", "a", "--exclude-queues", "b"], "--exclude-queues", "only with '*'"),
    (["--queues", "a,*", "--exclude-queues", "a"], "--exclude-queues", "'a' is also in --queues"),
    (["--queues", "*", "--exclude-queues", ""], "argument --exclude-queues: ", "got ''"),
    (["--queues", "*", "--exclude-queues", "b:2"], "argument --exclude-queues: ", "no weights"),
    (["--queues", "*", "--strict", "--exclude-queues", "*"], "--exclude-queues", "'*'"),
]


@pytest.mark.parametrize(("argv", "where", "text"), BAD)
def test_bad_flags_are_refused_naming_the_problem(argv, where, text):
    with pytest.raises(CommandError) as raised:
        call_command("runworkers", *argv, "--burst")
    assert where in str(raised.value)
    assert text in str(raised.value)
    assert Worker.objects.count() == 0


# -- every queue, in process -----------------------------------------------------------------


@both_stores
def test_every_queue_serves_a_queue_first_seen_after_start(using):
    w = worker(using, ["*"])
    assert w.run_once() == 0
    fresh = f"fresh-{uuid.uuid4().hex[:8]}"
    make_jobs(2, using=using, queue=fresh, type=NOOP, payload={})
    assert w.run_once() == 2
    assert states(using, fresh) == {JobState.SUCCEEDED: 2}


@both_stores
def test_an_excluded_queue_is_left_ready(using):
    for queue in ("a", "b", "x"):
        make_jobs(3, using=using, queue=queue, type=NOOP, payload={})
    w = worker(using, ["*"], exclude_queues=["x"], concurrency=4)
    while w.run_once():
        pass
    assert states(using, "a") == {JobState.SUCCEEDED: 3}
    assert states(using, "b") == {JobState.SUCCEEDED: 3}
    assert states(using, "x") == {JobState.READY: 3}


@both_stores
def test_queues_found_by_star_share_the_slots_fairly(using):
    """One slot, two saturated queues neither named: claim after claim they alternate."""
    for queue in ("a", "b"):
        make_jobs(6, using=using, queue=queue, type=NOOP, payload={})
    w = worker(using, ["*"], concurrency=1)
    for _ in range(6):
        assert w.run_once() == 1
    assert states(using, "a")[JobState.SUCCEEDED] == 3
    assert states(using, "b")[JobState.SUCCEEDED] == 3


@both_stores
def test_a_named_weight_beside_star_gets_its_share(using):
    """``hot:3,*``: hot is served 3:1 against each other queue, which weighs 1."""
    for queue in ("hot", "a", "b"):
        make_jobs(10, using=using, queue=queue, type=NOOP, payload={})
    w = worker(using, ["hot", "*"], weights=[3, 1], concurrency=5)
    assert w.run_once() == 5
    assert w.run_once() == 5
    assert states(using, "hot")[JobState.SUCCEEDED] == 6
    assert states(using, "a")[JobState.SUCCEEDED] == 2
    assert states(using, "b")[JobState.SUCCEEDED] == 2


@both_stores
def test_strict_star_serves_the_named_queue_first_then_the_others_by_name(using):
    make_jobs(1, using=using, queue="z-first", type=NOOP, payload={})
    for queue in ("c", "b"):
        make_jobs(2, using=using, queue=queue, type=NOOP, payload={})
    w = worker(using, ["z-first", "*"], strict=True, concurrency=2)
    assert w.run_once() == 2
    assert states(using, "z-first") == {JobState.SUCCEEDED: 1}
    assert states(using, "b") == {JobState.SUCCEEDED: 1, JobState.READY: 1}
    assert states(using, "c") == {JobState.READY: 2}


@both_stores
def test_a_star_worker_serves_every_queue_but_the_excluded_in_queue_status(using):
    """The dashboard and ``manage.py jobqueue`` read who serves what from the Worker rows: a
    ``*`` worker serves every queue but those it excludes, and ``*`` is no queue of its own."""
    for queue in ("a", "x"):
        make_jobs(1, using=using, queue=queue, type=NOOP, payload={})
    w = worker(using, ["*"], exclude_queues=["x"])
    w._register()
    status = {s.name: s for s in queue_status(timezone.now(), using)}
    assert (status["a"].workers, status["a"].unserved) == (1, False)
    assert (status["x"].workers, status["x"].unserved) == (0, True)
    assert set(status) == {"a", "x"}


# -- max tasks, in process -------------------------------------------------------------------


@both_stores
def test_max_tasks_never_claims_past_its_count(using):
    make_jobs(12, using=using, queue="mt", type=NOOP, payload={})
    w = worker(using, ["mt"], concurrency=10, max_tasks=5)
    assert w.run_once() == 5
    assert w.run_once() == 0
    assert w.quota.spent
    assert states(using, "mt") == {JobState.SUCCEEDED: 5, JobState.READY: 7}


# -- the claim's plan ------------------------------------------------------------------------


@pytest.mark.slow  # a load of a few thousand rows, then the planner
@requires_postgres()
def test_finding_every_queue_reads_the_claim_index_once_per_queue():
    """Before each claim of ``*`` the store reads which queues have claimable jobs: a loose index
    scan, one probe per queue, never a read of the table or of every claimable row."""
    for n in range(20):
        make_jobs(150, JobState.READY, queue=f"q{n}")
    make_jobs(3000, JobState.SUCCEEDED, queue="q1")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE jobqueue_job")
        params = {"after": "", "skip": [], "limit": 100}
        cursor.execute("EXPLAIN ANALYZE " + sql("claimable_queues"), params)
        plan = "\n".join(r[0] for r in cursor.fetchall())
        cursor.execute(sql("claimable_queues"), params)
        found = [name for (_, name) in cursor.fetchall()]
    assert found == sorted(f"q{n}" for n in range(20))
    assert "Index Only Scan using jobqueue_job_claim" in plan, plan
    assert "Seq Scan" not in plan, plan
    # One probe per queue found (and one that finds no more), not one per row.
    assert "rows=1 loops=20" in plan, plan


def _job_index_scans() -> int:
    """Return how many index scans of the jobs table this transaction has started so far."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(sum(idx_scan), 0) FROM pg_stat_xact_user_tables"
            " WHERE relname = 'jobqueue_job'"
        )
        return int(cursor.fetchone()[0])


@requires_postgres()
def test_a_star_claim_reads_a_window_of_queues_not_every_queue():
    """Issue 33: with 300 queues of one job each, a claim of 5 for ``*`` takes 5 jobs of 5
    queues in one claim statement (after reading the window), and its index reads stay those of
    5 queues, not of 300 (before: every queue with claimable jobs was listed and probed at each
    claim, 1.2 s a claim at 10,000 queues). The next claim takes the next 5 queues by name."""
    Job.objects.bulk_create(
        [Job(**job_kwargs(JobState.READY, queue=f"q{n:03}", type=NOOP)) for n in range(300)]
    )
    selector = QueueSelector(["*"])
    store = get_store("default")
    # The connection's first claim looks up the claim's function once (routines.py): done here.
    store.claim(["nothing-here"], "w1", 1, 30.0)
    with transaction.atomic():
        before = _job_index_scans()
        with CaptureQueriesContext(connection) as queries:
            claimed = store.claim(selector.queues, "w1", 5, 30.0, plan=selector.plan())
        scans = _job_index_scans() - before
    selector.claimed(claimed)
    assert sorted(j.queue for j in claimed) == ["q000", "q001", "q002", "q003", "q004"]
    assert len(queries) == 2, [q["sql"][:60] for q in queries]  # the window, the claim
    assert scans < 60, scans  # a few per queue of the window (before: 1,200 and more)
    following = store.claim(selector.queues, "w1", 5, 30.0, plan=selector.plan())
    assert sorted(j.queue for j in following) == ["q005", "q006", "q007", "q008", "q009"]


# -- real processes --------------------------------------------------------------------------

pg_process = [pytest.mark.slow, requires_postgres()]


@pytest.mark.slow
@requires_postgres()
def test_star_worker_serves_a_queue_created_after_it_started(workers):
    # A 600 s poll: only the new queue's notification can wake the idle worker in time.
    proc = workers.start(
        "--queues",
        "*",
        "--worker-id",
        "star-w1",
        settings={**FAST_WORKER_SETTINGS, "POLL_INTERVAL_SECONDS": 600},
    )
    workers.wait_for_log(proc, "worker star-w1: queues *", timeout=60)
    wait_for(lambda: Worker.objects.filter(worker_id="star-w1").exists(), timeout=60)
    fresh = f"fresh-{uuid.uuid4().hex[:8]}"
    job_id = jobqueue.enqueue(fresh, jobs.add, {"a": 1, "b": 2})
    wait_for(lambda: Job.objects.get(id=job_id).state == JobState.SUCCEEDED, timeout=120)
    proc.send_signal(signal.SIGTERM)
    assert workers.exit_code(proc, timeout=120) == 0


@pytest.mark.slow
@requires_postgres()
def test_exclude_queues_leaves_that_queue_ready(workers):
    with transaction.atomic():
        kept = [jobqueue.enqueue("kept", jobs.noop, {"n": n}) for n in range(3)]
        served = [jobqueue.enqueue(q, jobs.noop, {"n": n}) for q in ("s1", "s2") for n in range(3)]
    result = workers.run(
        "--queues",
        "*",
        "--exclude-queues",
        "kept",
        "--burst",
        settings=FAST_WORKER_SETTINGS,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert set(Job.objects.filter(id__in=served).values_list("state", flat=True)) == {"succeeded"}
    assert set(Job.objects.filter(id__in=kept).values_list("state", flat=True)) == {"ready"}


@pytest.mark.slow
@requires_postgres()
def test_max_tasks_exits_0_after_that_many_jobs(workers):
    with transaction.atomic():
        ids = [jobqueue.enqueue("mt", jobs.noop, {"n": n}) for n in range(12)]
    # Not --burst: the process must end by itself once it finished five.
    result = workers.run(
        "--queues",
        "mt",
        "--max-tasks",
        "5",
        "--concurrency",
        "4",
        settings=FAST_WORKER_SETTINGS,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert Counter(Job.objects.filter(id__in=ids).values_list("state", "attempts")) == {
        ("succeeded", 1): 5,
        ("ready", 0): 7,
    }
    assert Worker.objects.count() == 0


@pytest.mark.slow
@requires_postgres()
def test_supervisor_replaces_children_that_reached_max_tasks(workers):
    with transaction.atomic():
        ids = [jobqueue.enqueue("mtp", jobs.noop, {"n": n}) for n in range(12)]
    proc = workers.start(
        "--queues",
        "mtp",
        "--processes",
        "2",
        "--max-tasks",
        "3",
        "--concurrency",
        "2",
        "--no-scheduler",
        settings=FAST_WORKER_SETTINGS,
    )
    wait_for(
        lambda: Job.objects.filter(id__in=ids, state="succeeded").count() == len(ids),
        timeout=180,
    )
    reached, recycled = (
        "reached max_tasks",
        "recycled (a job overran, or it reached --max-tasks or --max-memory-per-child)",
    )
    # 12 jobs, at most 3 per child, at most two children left with fewer than 3: at least
    # three children reached the count, and the supervisor replaces each (not a crash).
    wait_for(lambda: workers.log(proc).count(recycled) >= 3, timeout=120)
    proc.send_signal(signal.SIGTERM)
    assert workers.exit_code(proc, timeout=120) == 0
    log = workers.log(proc)
    assert log.count(reached) >= 3, log
    assert "restarting in" not in log, log
    assert set(Job.objects.filter(id__in=ids).values_list("attempts", flat=True)) == {1}
