"""Real ``runworkers`` processes: the handler-thread cap and recycling (hardening item 7), and
claims sized to free slots (FIELD-CASES 33).

Outcomes only: who ran what, attempts, error kinds, thread counts the handlers saw, log lines
that name a recycle. No wall-clock bounds; every wait follows measured progress.
"""

from __future__ import annotations

import signal

import pytest

import jobqueue
from jobqueue.models import Job
from tests.conftest import FAST_WORKER_SETTINGS, record_lines, requires_postgres, wait_for
from tests.testapp import jobs

pytestmark = [pytest.mark.slow, requires_postgres(), pytest.mark.django_db(transaction=True)]

FINISHED = ("succeeded", "dead", "cancelled")


def states(ids: list[int]) -> dict[int, str]:
    return dict(Job.objects.filter(id__in=ids).values_list("id", "state"))


# -- hardening item 7: runaway handlers -----------------------------------------------------------


@pytest.mark.parametrize("processes", [None, "1"], ids=["single-process", "supervised"])
def test_cpu_bound_runaways_stay_under_the_thread_cap_and_recycle_the_process(
    workers, tmp_path, processes
):
    """--concurrency 2, so the cap is 4 handler threads. Four CPU-bound runaways (timeout_s 1,
    one attempt) among eight normal jobs: every handler sees at most 4 handler threads in its
    process; each runaway is dead (timeout) after one attempt; the process recycles (a single
    process re-runs itself in place, same pid; under --processes the supervisor replaces the
    child as a recycle, never as a crash); every normal job succeeds with attempts == 1 and no
    lease-expired entry (finished, or released and run again: never charged by a recycle)."""
    path = tmp_path / "runs.txt"
    runaways, normal = [], []
    for i in range(8):
        if i < 4:
            runaways.append(
                jobqueue.enqueue(
                    "runaway", jobs.spin_cpu, {"path": str(path)}, timeout_s=1, max_attempts=1
                )
            )
        normal.append(
            jobqueue.enqueue("runaway", jobs.record_threads, {"path": str(path), "sleep_s": 0.3})
        )
    args = ["--queues", "runaway", "--concurrency", "2", "--grace", "1"]
    proc = workers.start(
        *args, *(["--processes", processes] if processes else []), settings=FAST_WORKER_SETTINGS
    )
    ids = runaways + normal
    wait_for(
        lambda: set(states(ids).values()) <= set(FINISHED) or proc.poll() is not None,
        timeout=180,
    )
    log = workers.log(proc)
    assert proc.poll() is None, log
    for job in Job.objects.filter(id__in=runaways):
        assert (job.state, job.dead_reason, job.attempts) == ("dead", "timeout", 1), log
        assert [e["type"] for e in job.errors] == ["JobTimeout"]
    for job in Job.objects.filter(id__in=normal):
        assert (job.state, job.attempts) == ("succeeded", 1), log
        assert {e["kind"] for e in job.errors} <= {"released"}, job.errors
    threads_seen = [int(line[3]) for line in record_lines(path)]
    assert len(threads_seen) >= len(ids)
    assert max(threads_seen) <= 4, (threads_seen, log)
    if processes:
        assert (
            log.count(
                "recycled (a job overran, or it reached --max-tasks or --max-memory-per-child); "
                "replacing it"
            )
            >= 1
        ), log
        assert "restarting in" not in log, log  # a crash restart: never for a recycle
    else:
        # Stop the last image only once it runs (its signal handlers are in place before it
        # logs its start); no runaway is left to start another recycle.
        wait_for(
            lambda: (
                (log := workers.log(proc)).rfind(": queues runaway")
                > log.rfind("recycling this process")
            ),
            timeout=60,
        )
        log = workers.log(proc)
        assert log.count("recycling this process in place") >= 1, log
        # The same pid ran every job (the exec keeps it): no supervisor was needed.
        assert {line[2] for line in record_lines(path)} == {str(proc.pid)}
    proc.send_signal(signal.SIGTERM)
    assert workers.exit_code(proc, timeout=60) == 0, workers.log(proc)


# -- FIELD-CASES 33: claim only free slots ------------------------------------------------------


def leased_by() -> dict[int, str]:
    return dict(Job.objects.filter(state="leased").values_list("id", "leased_by"))


def test_a_busy_worker_claims_nothing_and_holds_no_buffered_job(workers, tmp_path):
    """W1 (--concurrency 2) holds two long jobs L1, L2; W2 (--concurrency 2) starts; S1..S20
    and H (priority 10) arrive. Sampled throughout: W1 never holds more than L1 and L2, W2 never
    more than 2. W2 runs every S and H; each job ends succeeded with attempts == 1 and no error
    entry. With W2 gone and five more jobs waiting, SIGTERM to W1 while it runs L1 and L2 leaves
    no other job leased by it (the five stay ready, attempts 0); L1 and L2 finish in its grace."""
    path, flag = tmp_path / "runs.txt", tmp_path / "release-long-jobs"
    w1 = workers.start("--queues", "hoard", "--concurrency", "2", "--worker-id", "w1")
    long_jobs = [
        jobqueue.enqueue("hoard", jobs.hold_until_file, {"path": str(path), "flag": str(flag)})
        for _ in range(2)
    ]
    wait_for(lambda: leased_by() == dict.fromkeys(long_jobs, "w1"), timeout=60)
    w2 = workers.start("--queues", "hoard", "--concurrency", "2", "--worker-id", "w2")
    workers.wait_for_log(w2, "worker w2: queues")
    short = [
        jobqueue.enqueue("hoard", jobs.record_threads, {"path": str(path), "sleep_s": 0.05})
        for _ in range(20)
    ]
    urgent = jobqueue.enqueue(
        "hoard", jobs.record_threads, {"path": str(path), "sleep_s": 0.05}, priority=10
    )
    quick = [*short, urgent]
    samples: list[dict[int, str]] = []

    def all_quick_done() -> bool:
        samples.append(leased_by())
        return set(states(quick).values()) == {"succeeded"}

    wait_for(all_quick_done, timeout=60, interval=0.1)
    for sample in samples:
        held = [job for job, worker in sample.items() if worker == "w1"]
        assert sorted(held) == sorted(long_jobs), sample
        assert sum(worker == "w2" for worker in sample.values()) <= 2, sample
    ran_by = {int(line[0]): int(line[2]) for line in record_lines(path)}
    assert {ran_by[job] for job in quick} == {w2.pid}
    assert {ran_by[job] for job in long_jobs} == {w1.pid}
    # W2 goes; five more jobs arrive while W1's slots are full. SIGTERM to W1 while it runs L1
    # and L2: nothing else is leased by it (it buffered nothing), and the five are untouched.
    w2.send_signal(signal.SIGTERM)
    assert workers.exit_code(w2, timeout=60) == 0
    later = [jobqueue.enqueue("hoard", jobs.noop, {}) for _ in range(5)]
    w1.send_signal(signal.SIGTERM)
    workers.wait_for_log(w1, "no new claims")
    assert leased_by() == dict.fromkeys(long_jobs, "w1")
    flag.touch()
    assert workers.exit_code(w1, timeout=60) == 0, workers.log(w1)
    for job in Job.objects.filter(id__in=[*long_jobs, *quick]):
        assert (job.state, job.attempts, job.errors) == ("succeeded", 1, []), (job.id, job.errors)
    assert set(Job.objects.filter(id__in=later).values_list("state", "attempts")) == {("ready", 0)}
