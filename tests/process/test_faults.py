"""Real faults against real ``runworkers`` processes on PostgreSQL: SIGKILL mid-job, a long job
under a short lease, a worker frozen (SIGSTOP) past its lease, a run over ``timeout_s``, database
connections cut, a poison job that kills its own worker, and SIGTERM / SIGINT during a drain.

Worker subprocesses read what the test commits, so these tests use
``django_db(transaction=True)``. Leases are 1.5 s, the reaper runs every 0.3 s and the backoff is
a fixed 0.1 s (``FAST_WORKER_SETTINGS``), so a lease expiry plus retry takes about two seconds.
"""

from __future__ import annotations

import re
import signal
import time
from datetime import datetime, timedelta

import pytest
from django.db import connection

import jobqueue
from jobqueue.errors import LeaseLost
from jobqueue.models import Job, Worker
from tests.conftest import FAST_WORKER_SETTINGS, record_lines, requires_postgres, wait_for
from tests.testapp import jobs

pytestmark = [pytest.mark.slow, requires_postgres(), pytest.mark.django_db(transaction=True)]

FINISHED = ("succeeded", "dead", "cancelled")


def state(job_id: int) -> str:
    return Job.objects.values_list("state", flat=True).get(id=job_id)


def lease_left(job_id: int) -> tuple[str, float | None]:
    """Return the job's state and its seconds of lease left, by the database clock."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT state, extract(epoch FROM lease_until - now())::float8 "
            "FROM jobqueue_job WHERE id = %s",
            [job_id],
        )
        return cursor.fetchone()


def db_now() -> datetime:
    with connection.cursor() as cursor:
        cursor.execute("SELECT now()")
        return cursor.fetchone()[0]


def runs_of(path, job_id: int) -> list[list[str]]:
    return [line for line in record_lines(path) if line[0] == str(job_id)]


# -- SIGKILL mid-job (FIELD-CASES 1) -------------------------------------------------------------


@pytest.mark.parametrize("variant", ["new-id-row-deleted", "reused-id"])
def test_sigkilled_worker_job_runs_again_after_its_lease_expires(workers, tmp_path, variant):
    """Kill W1 while it runs J; W2 reaps the expired lease and runs J as attempt 2.

    Variant A: W1's Worker row is deleted before the reaper runs. Variant B (a restarted pod):
    W2 registers under W1's worker id. Either way recovery depends only on J's own lease.
    """
    path = tmp_path / "runs.txt"
    j = jobqueue.enqueue(
        "crash", jobs.sleep_on_first_attempt, {"path": str(path), "sleep_s": 60}, timeout_s=120
    )
    w1 = workers.start("--queues", "crash", "--worker-id", "pod-a", settings=FAST_WORKER_SETTINGS)
    wait_for(lambda: runs_of(path, j), timeout=30)
    first = Job.objects.get(id=j)
    assert (first.state, first.attempts, first.leased_by) == ("leased", 1, "pod-a")
    token1 = first.lease_token

    w1.send_signal(signal.SIGKILL)
    assert workers.exit_code(w1) == -signal.SIGKILL
    assert state(j) == "leased"  # nobody gave it back: only the lease's expiry can
    if variant == "new-id-row-deleted":
        Worker.objects.filter(worker_id="pod-a").delete()
        w2_id = "pod-b"
    else:
        assert Worker.objects.filter(worker_id="pod-a", pid=w1.pid).exists()
        w2_id = "pod-a"
    w2 = workers.start("--queues", "crash", "--worker-id", w2_id, settings=FAST_WORKER_SETTINGS)
    wait_for(lambda: state(j) in FINISHED, timeout=30)

    job = Job.objects.get(id=j)
    assert (job.state, job.attempts, job.result, job.leased_by) == ("succeeded", 2, "done", w2_id)
    assert [(e["kind"], e["attempt"], e["worker"]) for e in job.errors] == [
        ("lease_expired", 1, "pod-a")
    ]
    assert [line[:3] for line in runs_of(path, j)] == [
        [str(j), "1", str(w1.pid)],
        [str(j), "2", str(w2.pid)],
    ]
    # The killed worker's token is dead: a zombie could neither extend nor finish the job.
    with pytest.raises(LeaseLost):
        jobqueue.heartbeat(j, token1)
    with pytest.raises(LeaseLost):
        jobqueue.ack(j, token1, "zombie")
    assert Job.objects.get(id=j).result == "done"
    assert "reaper: 1 expired lease(s) back to the queue, 0 dead-lettered" in workers.log(w2)
    if variant == "reused-id":
        assert Worker.objects.get(worker_id="pod-a").pid == w2.pid  # the new process took it over

    w2.send_signal(signal.SIGTERM)
    assert workers.exit_code(w2) == 0
    assert not Worker.objects.filter(worker_id=w2_id).exists()


# -- Long job, short lease (FIELD-CASES 2) --------------------------------------------------------


def test_heartbeats_keep_a_long_job_from_a_second_worker(workers, tmp_path):
    """A job under a 3 s lease runs until its lease has been extended past its original expiry
    3 times and W2 (polling, reaping) has run for a whole lease past that expiry; then it is
    let finish. W1's heartbeats extend the lease, so W2 never receives it; it runs once and
    succeeds on attempt 1. (Progress is measured on the database clock, not in seconds slept.)
    """
    lease_s = 3.0
    settings = {**FAST_WORKER_SETTINGS, "LEASE_SECONDS": lease_s}
    path, release = tmp_path / "runs.txt", tmp_path / "release"
    j = jobqueue.enqueue(
        "long", jobs.record_until_released, {"path": str(path), "release": str(release)}
    )
    w1 = workers.start("--queues", "long", "--worker-id", "long-w1", settings=settings)
    wait_for(lambda: runs_of(path, j), timeout=60)
    w2 = workers.start("--queues", "long", "--worker-id", "long-w2", settings=settings)
    wait_for(lambda: Worker.objects.filter(worker_id="long-w2").exists(), timeout=60)
    seen_w1 = Worker.objects.get(worker_id="long-w1").last_seen_at

    lease_ends = []

    def sample() -> None:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT lease_until, lease_until > now() FROM jobqueue_job "
                "WHERE id = %s AND state = 'leased'",
                [j],
            )
            row = cursor.fetchone()
        assert row is not None, f"job {j} is {state(j)}, no longer leased while it runs"
        assert row[1], "the lease of a running job lapsed"
        lease_ends.append(row[0])

    def extended_and_w2_had_its_chance() -> bool:
        sample()
        first_expiry = lease_ends[0]
        extensions = {end for end in lease_ends if end > first_expiry}
        w2_since = first_expiry + timedelta(seconds=lease_s)
        return (
            len(extensions) >= 3
            and Worker.objects.filter(worker_id="long-w2", last_seen_at__gt=w2_since).exists()
        )

    wait_for(extended_and_w2_had_its_chance, timeout=120, interval=0.2)
    release.touch()
    wait_for(lambda: state(j) in FINISHED, timeout=60)
    job = Job.objects.get(id=j)
    assert (job.state, job.attempts, job.errors, job.leased_by) == ("succeeded", 1, [], "long-w1")
    assert job.result == {"attempt": 1, "released": True}
    assert [line[:3] for line in runs_of(path, j)] == [[str(j), "1", str(w1.pid)]]
    assert lease_ends == sorted(lease_ends)  # extended, never cut
    assert Worker.objects.get(worker_id="long-w1").last_seen_at > seen_w1
    assert "reaper:" not in workers.log(w1) + workers.log(w2)
    for proc in (w1, w2):
        proc.send_signal(signal.SIGTERM)
        assert workers.exit_code(proc, timeout=60) == 0


def test_a_frozen_worker_cannot_finish_a_job_another_worker_now_owns(workers, tmp_path):
    """FIELD-CASES 2, heartbeat wedged: SIGSTOP W1 mid-job for longer than the lease.

    W2 reaps the lease and runs J as attempt 2. W1 is resumed while W2 still runs it: W1's late
    heartbeat and ack carry the old token, so they change nothing (logged, swallowed) and W1
    stays up; J ends with W2's result and ``attempts == 2``.
    """
    path = tmp_path / "runs.txt"
    j = jobqueue.enqueue("frozen", jobs.record, {"path": str(path), "sleep_s": 2})
    w1 = workers.start(
        "--queues", "frozen", "--worker-id", "frozen-w1", settings=FAST_WORKER_SETTINGS
    )
    wait_for(lambda: runs_of(path, j), timeout=300)
    w1.send_signal(signal.SIGSTOP)
    try:
        w2 = workers.start(
            "--queues", "frozen", "--worker-id", "frozen-w2", settings=FAST_WORKER_SETTINGS
        )
        wait_for(lambda: len(runs_of(path, j)) == 2, timeout=300)
    finally:
        w1.send_signal(signal.SIGCONT)
    workers.wait_for_log(w1, "but its lease was lost", timeout=300)
    if state(j) == "leased":  # W1's attempt 1 was turned away while W2 still held attempt 2
        assert Job.objects.get(id=j).leased_by == "frozen-w2"
    wait_for(lambda: state(j) in FINISHED, timeout=300)

    job = Job.objects.get(id=j)
    assert (job.state, job.attempts, job.result, job.leased_by) == (
        "succeeded",
        2,
        {"attempt": 2},
        "frozen-w2",
    )
    assert [(e["kind"], e["attempt"], e["worker"]) for e in job.errors] == [
        ("lease_expired", 1, "frozen-w1")
    ]
    assert [line[:3] for line in runs_of(path, j)] == [
        [str(j), "1", str(w1.pid)],
        [str(j), "2", str(w2.pid)],
    ]
    assert re.search(
        rf"job {j} \S+ attempt 1/8 succeeded in .* but its lease was lost", workers.log(w1)
    )
    # The line follows the write that made the job succeeded: wait for it, do not race it
    # (at load ~20 the test read the log first, 2 runs of 3).
    workers.wait_for_log(
        w2, f"job {j} tests.testapp.jobs.record attempt 2/8 succeeded in", timeout=300
    )
    for proc in (w1, w2):
        assert proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        assert workers.exit_code(proc) == 0


def test_timeout_s_is_a_hard_limit_even_while_the_lease_is_alive(workers, tmp_path):
    """FIELD-CASES 2, hard-limit variant: attempt 1 sleeps 6 s with ``timeout_s=1``; the worker
    fails it with a timeout error at about 1 s, and attempt 2 (which returns at once) succeeds.
    """
    path = tmp_path / "runs.txt"
    j = jobqueue.enqueue(
        "hardlimit",
        jobs.sleep_on_first_attempt,
        {"path": str(path), "sleep_s": 6},
        timeout_s=1,
        max_attempts=2,
    )
    workers.start("--queues", "hardlimit", "--concurrency", "2", settings=FAST_WORKER_SETTINGS)
    wait_for(lambda: state(j) in FINISHED, timeout=60)
    job = Job.objects.get(id=j)
    assert (job.state, job.attempts, job.result) == ("succeeded", 2, "done"), job.errors
    assert len(job.errors) == 1 and job.errors[0]["attempt"] == 1
    assert "timeout" in f"{job.errors[0]['type']} {job.errors[0]['message']}".lower()
    assert [line[1] for line in runs_of(path, j)] == ["1", "2"]


def test_a_timed_out_job_frees_its_slot_and_dies_with_reason_timeout(workers, tmp_path):
    """With one slot, a runaway handler (sleeps 12 s, ``timeout_s=1``, one attempt) is failed at
    its limit: dead, reason ``timeout``; the next job gets the slot while the runaway's thread
    is still sleeping, and the runaway's late return changes nothing.
    """
    path = tmp_path / "runs.txt"
    runaway = jobqueue.enqueue(
        "runaway",
        jobs.sleep_on_first_attempt,
        {"path": str(path), "sleep_s": 12},
        timeout_s=1,
        max_attempts=1,
    )
    w = workers.start("--queues", "runaway", "--concurrency", "1", settings=FAST_WORKER_SETTINGS)
    wait_for(lambda: state(runaway) in FINISHED, timeout=60)
    dead = Job.objects.get(id=runaway)
    assert (dead.state, dead.dead_reason, dead.attempts) == ("dead", "timeout", 1)
    assert dead.errors[-1]["type"] == "JobTimeout"
    nxt = jobqueue.enqueue("runaway", jobs.record, {"path": str(path)})
    wait_for(lambda: state(nxt) in FINISHED, timeout=60)
    done = Job.objects.get(id=nxt)
    assert done.state == "succeeded"
    # The runaway's handler sleeps 12 s from its start (database clock); the next job ran in
    # the freed slot while it slept, not after it (an ordering: 12 s is far more than a claim
    # and a no-op take even on a loaded machine, and a slot not freed makes it at least 12 s).
    assert done.finished_at < dead.started_at + timedelta(seconds=12)
    workers.wait_for_log(w, "outcome discarded", timeout=60)
    assert Job.objects.get(id=runaway).state == "dead"


# -- Database connections cut (DESIGN promise 1: "through ... a database restart") -------------


def terminate_other_backends(terminate: bool = True) -> int:
    """Cut every other connection to the test database, as a server restart would (or, with
    ``terminate=False``, only count them)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count({'pg_terminate_backend(pid)' if terminate else '*'}) "
            "FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0]


def test_worker_rides_out_its_connections_being_cut(workers, tmp_path):
    """Cut the worker's connections three times while J runs: it reconnects, keeps J's lease,
    acks J once, and goes on to run K.
    """
    path = tmp_path / "runs.txt"
    j = jobqueue.enqueue("cut", jobs.record, {"path": str(path), "sleep_s": 2})
    # A 5 s lease: the point is reconnecting, and on a loaded machine three reconnects can take
    # longer than the fast settings' 1.5 s lease (the reaper would then rightly rerun J).
    settings = {**FAST_WORKER_SETTINGS, "LEASE_SECONDS": 5}
    w1 = workers.start("--queues", "cut", "--worker-id", "cut-w1", settings=settings)
    wait_for(lambda: runs_of(path, j), timeout=60)
    cut = 0
    for _ in range(3):
        # Each cut hits connections the worker made again after the previous one.
        wait_for(lambda: terminate_other_backends(terminate=False) > 0, timeout=60)
        cut += terminate_other_backends()
    assert cut >= 3
    wait_for(lambda: state(j) in FINISHED, timeout=60)
    k = jobqueue.enqueue("cut", jobs.record, {"path": str(path)})
    wait_for(lambda: state(k) in FINISHED, timeout=60)

    for job_id in (j, k):
        job = Job.objects.get(id=job_id)
        assert (job.state, job.attempts, job.errors) == ("succeeded", 1, []), job.errors
        assert len(runs_of(path, job_id)) == 1
    log = workers.log(w1)
    assert "database is back after" in log, log
    assert w1.poll() is None, log
    w1.send_signal(signal.SIGTERM)
    assert workers.exit_code(w1) == 0
    assert not Worker.objects.filter(worker_id="cut-w1").exists()


# -- Poison job (FIELD-CASES 13) ------------------------------------------------------------------


def test_poison_job_that_kills_its_worker_is_dead_after_max_attempts(workers, tmp_path):
    """P SIGKILLs its own worker on every run. A stand-in supervisor restarts the worker.

    P starts exactly 3 times and is dead-lettered by the reaper (attempts count claims, so a job
    that never reaches nack still stops); K, behind it, succeeds on its first attempt.
    """
    poison_path, k_path = tmp_path / "poison.txt", tmp_path / "k.txt"
    p = jobqueue.enqueue(
        "poison", jobs.kill_own_process, {"path": str(poison_path)}, max_attempts=3
    )
    k = jobqueue.enqueue("poison", jobs.record, {"path": str(k_path)})
    args = ("--queues", "poison", "--concurrency", "1")

    started = [workers.start(*args, settings=FAST_WORKER_SETTINGS)]
    deadline = time.monotonic() + 180  # bounds a hang only
    while state(p) not in FINISHED:
        assert time.monotonic() < deadline, f"poison job still {state(p)}; {len(started)} starts"
        if started[-1].poll() is not None:
            # A fourth death means a fourth run: the attempt cap did not hold. Fail now.
            assert len(started) <= 3, f"worker died {len(started)} times; P is {state(p)}"
            started.append(workers.start(*args, settings=FAST_WORKER_SETTINGS))
        time.sleep(0.1)
    wait_for(lambda: state(k) == "succeeded", timeout=60)
    # The process that dead-lettered P stays up: no fourth run, no fourth death. Waiting on
    # nothing happening: until the survivor's own heartbeats show it ran for a lease plus a few
    # reaper ticks more (database clock), whatever the machine's load.
    survivor = started[-1]
    quiet_until = db_now() + timedelta(seconds=2.0)
    wait_for(
        lambda: (
            survivor.poll() is not None
            or Worker.objects.filter(pid=survivor.pid, last_seen_at__gt=quiet_until).exists()
        ),
        timeout=60,
    )
    assert survivor.poll() is None, workers.log(survivor)

    restarts = len(started) - 1
    assert restarts == 3
    assert [proc.returncode for proc in started[:-1]] == [-signal.SIGKILL] * 3
    job = Job.objects.get(id=p)
    assert (job.state, job.attempts, job.dead_reason) == ("dead", 3, "attempts_exhausted")
    assert [(e["kind"], e["attempt"]) for e in job.errors] == [
        ("lease_expired", 1),
        ("lease_expired", 2),
        ("lease_expired", 3),
    ]
    assert [line[:3] for line in runs_of(poison_path, p)] == [
        [str(p), str(n), str(proc.pid)] for n, proc in zip((1, 2, 3), started[:3], strict=True)
    ]
    k_job = Job.objects.get(id=k)
    assert (k_job.state, k_job.attempts, k_job.errors) == ("succeeded", 1, [])
    assert len(runs_of(k_path, k)) == 1
    assert "1 dead-lettered" in workers.log(survivor)

    survivor.send_signal(signal.SIGTERM)
    assert workers.exit_code(survivor) == 0


# -- SIGTERM: drain, then release (FIELD-CASES 21, sized down) ------------------------------------


def test_sigterm_drains_running_jobs_then_releases_the_rest(workers, tmp_path):
    """Grace 10 s: J1 (2 s) finishes; J2 (60 s) is released at the end of grace, its attempt given
    back; W1 claims nothing after the signal and keeps heartbeating; a later worker runs J2.
    Times compared are database times.
    """
    path = tmp_path / "runs.txt"
    q = "drain"
    j1 = jobqueue.enqueue(q, jobs.record, {"path": str(path), "sleep_s": 2})
    j2 = jobqueue.enqueue(
        q, jobs.sleep_on_first_run, {"path": str(path), "sleep_s": 60}, timeout_s=120
    )
    w1 = workers.start(
        "--queues",
        q,
        "--concurrency",
        "2",
        "--grace",
        "10",
        "--worker-id",
        "drain-w1",
        settings=FAST_WORKER_SETTINGS,
    )
    wait_for(lambda: runs_of(path, j1) and runs_of(path, j2), timeout=60)
    assert state(j1) == state(j2) == "leased"

    signalled = db_now()  # taken before the signal: the drain lasts at least from here
    w1.send_signal(signal.SIGTERM)
    workers.wait_for_log(w1, "SIGTERM: no new claims", timeout=60)
    j3 = jobqueue.enqueue(q, jobs.noop, {})

    # Until W1 exits: J3 is never claimed, and J2's lease never lapses (heartbeats go on while
    # draining; with a 1.5 s lease they are the only way J2 is still held seconds later).
    j2_samples = []
    give_up = time.monotonic() + 120  # bounds a hang only
    while w1.poll() is None:
        assert time.monotonic() < give_up, workers.log(w1)
        assert state(j3) == "ready"
        j2_state, left = lease_left(j2)
        if j2_state == "leased":
            assert left > 0, f"J2's lease lapsed during the drain ({left:.2f} s)"
            j2_samples.append((db_now() - signalled).total_seconds())
        time.sleep(0.1)
    assert w1.returncode == 0, workers.log(w1)
    # J2 held its slot until the grace ran out (released no earlier than 10 s after the
    # signal), and was seen still leased well past one lease length.
    [release] = Job.objects.get(id=j2).errors
    assert datetime.fromisoformat(release["at"]) >= signalled + timedelta(seconds=10)
    assert j2_samples and max(j2_samples) > 3 * 1.5

    done = Job.objects.get(id=j1)
    assert (done.state, done.attempts, done.errors, done.result) == (
        "succeeded",
        1,
        [],
        {"attempt": 1},
    )
    released = Job.objects.get(id=j2)
    assert (released.state, released.attempts, released.lease_token) == ("ready", 0, None)
    assert [(e["kind"], e["attempt"]) for e in released.errors] == [("released", 1)]
    assert (state(j3), Job.objects.get(id=j3).attempts) == ("ready", 0)
    assert not Worker.objects.filter(worker_id="drain-w1").exists()
    log = workers.log(w1)
    assert f"job {j2} tests.testapp.jobs.sleep_on_first_run attempt 1/8 released at shutdown" in log
    assert "stopped: succeeded 1, retried 0, dead 0, cancelled 0, lost 0, released 1" in log

    # W2 takes over: J2 runs again (its handler ran twice) and succeeds on attempt 1.
    result = workers.run("--burst", "--queues", q, settings=FAST_WORKER_SETTINGS, timeout=60)
    assert result.returncode == 0, result.stderr
    again = Job.objects.get(id=j2)
    assert (again.state, again.attempts, again.result) == ("succeeded", 1, {"runs_before": 1})
    assert [line[1] for line in runs_of(path, j2)] == ["1", "1"]
    assert len(runs_of(path, j1)) == 1
    assert state(j3) == "succeeded"


@pytest.mark.parametrize("second", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_second_signal_releases_running_jobs_at_once(workers, tmp_path, second):
    """SIGTERM starts a 120 s drain; a second signal cuts it short: both leases released now."""
    path = tmp_path / "runs.txt"
    q = "drain2"
    j1 = jobqueue.enqueue(q, jobs.record, {"path": str(path), "sleep_s": 240}, timeout_s=300)
    j2 = jobqueue.enqueue(q, jobs.record, {"path": str(path), "sleep_s": 240}, timeout_s=300)
    w1 = workers.start(
        "--queues",
        q,
        "--concurrency",
        "2",
        "--grace",
        "120",
        "--worker-id",
        "drain2-w1",
        settings=FAST_WORKER_SETTINGS,
    )
    wait_for(lambda: runs_of(path, j1) and runs_of(path, j2), timeout=30)

    w1.send_signal(signal.SIGTERM)
    workers.wait_for_log(w1, "SIGTERM: no new claims", timeout=60)
    w1.send_signal(second)
    # It exits while both handlers still sleep (240 s), before the 120 s grace could run out:
    # the second signal, not the jobs or the grace, ended the drain.
    assert workers.exit_code(w1, timeout=90) == 0

    for job_id in (j1, j2):
        job = Job.objects.get(id=job_id)
        assert (job.state, job.attempts, job.lease_token) == ("ready", 0, None)
        assert [(e["kind"], e["attempt"]) for e in job.errors] == [("released", 1)]
    assert not Worker.objects.filter(worker_id="drain2-w1").exists()
    log = workers.log(w1)
    assert f"{second.name}: releasing running jobs now" in log
    assert "stopped: succeeded 0, retried 0, dead 0, cancelled 0, lost 0, released 2" in log
