"""Stops under ``--processes N``: SIGTERM to the supervisor alone or to the whole process group
(systemd ``KillMode=control-group``, Kubernetes) drains the same way; a second, separate SIGTERM,
or Ctrl-C's SIGINT to the group, releases at once (DESIGN.md "A stop is a stop").

Real supervisors, real children, real signals; outcomes are job states, attempts and which
handlers ran, never durations.
"""

from __future__ import annotations

import os
import signal

import pytest

import jobqueue
from jobqueue.models import Job, Worker
from jobqueue.worker.stopping import record_cause, stop_cause
from tests.conftest import FAST_WORKER_SETTINGS, record_lines, requires_postgres, wait_for
from tests.testapp import jobs

pytestmark = [pytest.mark.slow, requires_postgres(), pytest.mark.django_db(transaction=True)]

FINISHED = ("succeeded", "dead", "cancelled")


def send(proc, signum: int, target: str) -> None:
    """Send ``signum`` to the supervisor alone, or to its whole process group."""
    if target == "group":
        os.killpg(proc.pid, signum)  # what systemd and Kubernetes do
    else:
        proc.send_signal(signum)


def exited(pid: int) -> bool:
    """Return whether process ``pid`` is gone or a zombie (an orphan waits for init to reap it)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def start_four_running(workers, tmp_path, q: str, sleep_s: float, grace: str):
    """Two processes of two threads, four jobs running (sleep_s each) and three queued."""
    path = tmp_path / "runs.txt"
    running = [
        jobqueue.enqueue(q, jobs.record, {"path": str(path), "sleep_s": sleep_s}, timeout_s=120)
        for _ in range(4)
    ]
    sup = workers.start(
        "--queues", q, "--processes", "2", "--concurrency", "2", "--grace", grace,
        settings=FAST_WORKER_SETTINGS,
    )  # fmt: skip
    wait_for(lambda: len(record_lines(path)) == 4, timeout=60)
    # Queued only now, so that they cannot have been among the first claims.
    queued = [jobqueue.enqueue(q, jobs.record, {"path": str(path)}) for _ in range(3)]
    return sup, path, running, queued


@pytest.mark.parametrize("target", ["supervisor", "group"])
def test_sigterm_drains_running_jobs_whether_sent_to_the_supervisor_or_the_group(
    workers, tmp_path, target
):
    """Four 3 s jobs mid-run, grace 60 s: all four finish (succeeded, attempt 1), the three
    queued jobs never start, the supervisor exits 0 (before the fix, the group's SIGTERM plus
    the supervisor's forwarded one counted as two in each child: all four were released)."""
    sup, path, running, queued = start_four_running(workers, tmp_path, f"stop-{target}", 3, "60")

    send(sup, signal.SIGTERM, target)

    assert workers.exit_code(sup, timeout=90) == 0, workers.log(sup)
    finished = {j.id: (j.state, j.attempts, j.errors) for j in Job.objects.filter(id__in=running)}
    assert finished == {i: ("succeeded", 1, []) for i in running}, workers.log(sup)
    assert {(j.state, j.attempts) for j in Job.objects.filter(id__in=queued)} == {("ready", 0)}
    assert len(record_lines(path)) == 4  # no queued job started
    log = workers.log(sup)
    assert "releasing running jobs now" not in log, log
    assert "released at shutdown" not in log, log
    # The children name the real cause, not the supervisor's own signal (it logged "SIGUSR1").
    assert "SIGTERM: drain: passing it on" in log, log
    if target == "supervisor":
        assert log.count("SIGTERM to the supervisor: no new claims") == 2, log
        assert "SIGUSR1" not in log, log


@pytest.mark.parametrize(
    ("first", "second"),
    [("group", "group"), ("group", "supervisor"), ("supervisor", "group")],
)
def test_a_second_separate_sigterm_releases_running_jobs_at_once(workers, tmp_path, first, second):
    """Four 60 s jobs mid-run, grace 120 s: a first SIGTERM drains, a second, separate one
    (to the group or to the supervisor) releases all four now: ready, attempt not counted."""
    sup, _, running, queued = start_four_running(workers, tmp_path, "stop-twice", 60, "120")

    send(sup, signal.SIGTERM, first)
    # Both children draining, and the supervisor's own handler run: a second SIGTERM sent to it
    # before that would merge with the first (a pending signal is not queued twice), and the
    # jobs would run their 60 s (seen under load, group then supervisor).
    wait_for(
        lambda: (
            workers.log(sup).count("no new claims") == 2
            and "SIGTERM: drain: passing it on" in workers.log(sup)
        ),
        timeout=30,
    )
    send(sup, signal.SIGTERM, second)

    assert workers.exit_code(sup, timeout=60) == 0, workers.log(sup)
    for job in Job.objects.filter(id__in=running):
        assert (job.state, job.attempts, job.lease_token) == ("ready", 0, None), workers.log(sup)
        assert [(e["kind"], e["attempt"]) for e in job.errors] == [("released", 1)]
    assert {(j.state, j.attempts) for j in Job.objects.filter(id__in=queued)} == {("ready", 0)}
    assert workers.log(sup).count("released at shutdown") == 4


def test_ctrl_c_to_the_group_releases_running_jobs_at_once(workers, tmp_path):
    """Ctrl-C sends SIGINT to the whole foreground group: running jobs are released now (their
    attempt not counted), nothing else starts, the supervisor exits 0."""
    sup, path, running, queued = start_four_running(workers, tmp_path, "stop-int", 60, "120")

    send(sup, signal.SIGINT, "group")

    assert workers.exit_code(sup, timeout=60) == 0, workers.log(sup)
    assert {(j.state, j.attempts) for j in Job.objects.filter(id__in=running)} == {("ready", 0)}
    assert {(j.state, j.attempts) for j in Job.objects.filter(id__in=queued)} == {("ready", 0)}
    assert len(record_lines(path)) == 4


def test_children_of_a_killed_supervisor_drain_and_exit(workers, tmp_path):
    """SIGKILL the supervisor alone: Linux sends each child the drain signal (PR_SET_PDEATHSIG),
    so the four running jobs finish (succeeded, attempt 1), nothing queued starts, and the
    children exit (their worker rows are deleted at a clean exit)."""
    sup, path, running, queued = start_four_running(workers, tmp_path, "stop-orphan", 3, "60")
    children = set(Worker.objects.values_list("pid", flat=True))
    assert len(children) == 2

    sup.send_signal(signal.SIGKILL)

    wait_for(lambda: not Worker.objects.filter(pid__in=children).exists(), timeout=90)
    for pid in children:
        wait_for(lambda pid=pid: exited(pid), timeout=30)
    assert {(j.state, j.attempts) for j in Job.objects.filter(id__in=running)} == {("succeeded", 1)}
    assert {(j.state, j.attempts) for j in Job.objects.filter(id__in=queued)} == {("ready", 0)}
    assert len(record_lines(path)) == 4


# -- a job that kills its process (hardening item 11) ---------------------------------------------


def test_a_process_killing_job_is_charged_alone_and_its_neighbours_never(workers, tmp_path):
    """A job that SIGKILLs its own process, max_attempts 4, beside 50 innocent 0.5 s jobs under
    --processes 2 --concurrency 4: the poison job ends dead after exactly 4 charged attempts (at
    most one more run, in company, not charged); every innocent job succeeds on attempt 1, though
    some were running when the poison job killed their process. (Before: the supervisor left a
    dead child's leases to expire, and each expiry charged every job the child held.)"""
    path = tmp_path / "runs.txt"
    q = "poison11"
    # A lease long enough that no innocent lease expires while waiting: the hand-back, not the
    # reaper, must return them (a 60 s lease would make "before" take minutes; 4 s is enough).
    settings = {**FAST_WORKER_SETTINGS, "LEASE_SECONDS": 4}
    poison = jobqueue.enqueue(q, jobs.kill_own_process, {"path": str(path)}, max_attempts=4)
    innocent = [
        jobqueue.enqueue(q, jobs.record, {"path": str(path), "sleep_s": 0.5}, max_attempts=4)
        for _ in range(50)
    ]
    sup = workers.start(
        "--queues", q, "--processes", "2", "--concurrency", "4", settings=settings
    )  # fmt: skip
    every = [poison, *innocent]
    wait_for(
        lambda: Job.objects.filter(id__in=every, state__in=FINISHED).count() == len(every),
        timeout=180,
    )
    job = Job.objects.get(id=poison)
    poison_runs = [line for line in record_lines(path) if line[0] == str(poison)]
    innocents = {j.id: (j.state, j.attempts) for j in Job.objects.filter(id__in=innocent)}
    overcharged = sorted(i for i, (_, attempts) in innocents.items() if attempts > 1)
    died = sorted(i for i, (s, _) in innocents.items() if s != "succeeded")
    print(
        f"poison: {job.state} attempts {job.attempts} runs {len(poison_runs)}; innocent jobs "
        f"charged extra attempts: {len(overcharged)}, not succeeded: {len(died)}"
    )
    assert (job.state, job.dead_reason, job.attempts) == ("dead", "attempts_exhausted", 4)
    assert 4 <= len(poison_runs) <= 5, poison_runs
    assert (overcharged, died) == ([], []), innocents
    # Some innocent jobs really were beside it when it struck (else this proves nothing).
    beside = Job.objects.filter(id__in=innocent, errors__contains=[{"kind": "process_died"}])
    assert beside.exists(), workers.log(sup)
    assert sup.poll() is None


# -- worker ids and rows under the supervisor ------------------------------------------------------


def parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def test_leased_by_names_the_child_and_a_killed_childs_row_goes_with_its_leases(workers, tmp_path):
    """Under --processes 2, a running job's ``leased_by`` carries the pid of the child that runs
    it (host:pid:random), not the supervisor's: the pid an operator would signal. When that child
    is killed with SIGKILL, its leases are handed back and its Worker row is removed at once
    (before: it stayed "running" until the row pruner, and health counted a silent worker)."""
    path = tmp_path / "runs.txt"
    q = "childids"
    job_id = jobqueue.enqueue(q, jobs.record, {"path": str(path), "sleep_s": 30}, timeout_s=120)
    sup = workers.start(
        "--queues", q, "--processes", "2", "--concurrency", "1", settings=FAST_WORKER_SETTINGS
    )  # fmt: skip
    wait_for(lambda: len(record_lines(path)) == 1, timeout=60)
    leased_by = Job.objects.get(id=job_id).leased_by
    pid = int(leased_by.split(":")[1])
    assert pid != sup.pid
    assert parent_of(pid) == sup.pid, (leased_by, sup.pid)
    assert Worker.objects.get(worker_id=leased_by).pid == pid

    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not Worker.objects.filter(worker_id=leased_by).exists(), timeout=60)
    # Handed back, not left to expire: the job is free again (charged, it ran alone).
    wait_for(lambda: Job.objects.get(id=job_id).leased_by != leased_by, timeout=60)
    # The replacement child registered under its own pid.
    wait_for(lambda: Worker.objects.count() == 2, timeout=60)
    assert set(Worker.objects.values_list("pid", flat=True)) & {sup.pid, pid} == set()
    assert sup.poll() is None


def test_a_child_killed_while_draining_has_its_leases_handed_back(workers, tmp_path):
    """SIGTERM, then SIGKILL one draining child: its two running jobs are handed back at once
    (ready, attempt not counted, its Worker row gone), not left leased until their 600 s
    lease expires; the other child's two jobs finish, and the supervisor exits 0 (found by a
    trial: the supervisor skipped the hand-back once a stop had come)."""
    path = tmp_path / "runs.txt"
    q = "drainkill"
    running = [
        jobqueue.enqueue(q, jobs.record, {"path": str(path), "sleep_s": 10}, timeout_s=120)
        for _ in range(4)
    ]
    sup = workers.start(
        "--queues", q, "--processes", "2", "--concurrency", "2", "--grace", "120",
        "--lease", "600", settings=FAST_WORKER_SETTINGS,
    )  # fmt: skip
    wait_for(lambda: len(record_lines(path)) == 4, timeout=300)
    holders = set(Job.objects.filter(id__in=running).values_list("leased_by", flat=True))
    assert len(holders) == 2, holders
    victim = sorted(holders)[0]
    victims = set(Job.objects.filter(leased_by=victim).values_list("id", flat=True))

    send(sup, signal.SIGTERM, "supervisor")
    wait_for(lambda: workers.log(sup).count("no new claims") == 2, timeout=300)
    os.kill(int(victim.split(":")[1]), signal.SIGKILL)

    # The hand-back gives the leases back, then deletes the Worker row, in two statements: wait
    # for both (under load the second came after a check made between them).
    wait_for(
        lambda: (
            not Job.objects.filter(id__in=victims, state="leased").exists()
            and not Worker.objects.filter(worker_id=victim).exists()
        ),
        timeout=300,
    )
    assert {(j.state, j.attempts) for j in Job.objects.filter(id__in=victims)} == {("ready", 0)}
    assert workers.exit_code(sup, timeout=300) == 0, workers.log(sup)
    others = Job.objects.filter(id__in=set(running) - victims)
    assert {(j.state, j.attempts) for j in others} == {("succeeded", 1)}, workers.log(sup)
    assert "handed back uncharged" in workers.log(sup), workers.log(sup)


def test_a_supervised_worker_names_the_signal_its_supervisor_received():
    """The supervisor's forward is SIGUSR1/SIGUSR2; the child's log names what the supervisor
    got (recorded in memory shared across the fork), and a lone worker names what it got."""
    try:
        record_cause(signal.SIGTERM)
        assert stop_cause(signal.SIGUSR1, supervised=True) == "SIGTERM to the supervisor"
        assert stop_cause(signal.SIGTERM, supervised=True) == "SIGTERM"
        assert stop_cause(signal.SIGUSR1, supervised=False) == "SIGUSR1"
        record_cause(signal.SIGINT)
        assert stop_cause(signal.SIGUSR2, supervised=True) == "SIGINT to the supervisor"
        record_cause(0)  # the kernel's drain when the supervisor died: nothing recorded
        assert stop_cause(signal.SIGUSR1, supervised=True) == (
            "the supervisor's exit or a direct SIGUSR1"
        )
    finally:
        record_cause(0)
