"""Pause and resume against a real ``runworkers`` process, driven through the real CLI.

The worker serves two queues. Once ``jobqueue pause`` returns, the worker claims none of the
paused queue's jobs while it goes on claiming the other queue's (progress, not time: the other
queue's jobs enqueued after the paused one's finish, and still the paused ones wait, ready, never
claimed). ``jobqueue resume`` then wakes the worker: it polls only every two minutes here, so the
jobs finishing within the wait can only be the resume's NOTIFY waking it.
"""

from __future__ import annotations

import pytest

import jobqueue
from jobqueue.models import Job, Pause, Worker
from tests.conftest import FAST_WORKER_SETTINGS, requires_postgres, wait_for
from tests.jobqueue_cli import cli

pytestmark = [pytest.mark.slow, requires_postgres(), pytest.mark.django_db(transaction=True)]

ADD = "tests.testapp.jobs.add"
#: Only a NOTIFY wakes an idle worker within a test's waits.
SLOW_POLL = {**FAST_WORKER_SETTINGS, "POLL_INTERVAL_SECONDS": 120}


def states(ids: list[int]) -> list[tuple[str, int]]:
    return list(Job.objects.filter(id__in=ids).order_by("id").values_list("state", "attempts"))


def succeeded(ids: list[int]) -> bool:
    return Job.objects.filter(id__in=ids, state="succeeded").count() == len(ids)


def test_a_running_worker_stops_claiming_a_paused_queue_and_resume_wakes_it(workers):
    proc = workers.start("--queues", "mail,other", "--worker-id", "pause-w1", settings=SLOW_POLL)
    wait_for(lambda: Worker.objects.filter(worker_id="pause-w1", pid=proc.pid).exists())
    # The worker serves "mail": a job of it runs.
    first = jobqueue.enqueue("mail", ADD, {"a": 1, "b": 1})
    wait_for(lambda: succeeded([first]), timeout=60)

    paused = cli("pause", "mail", "--by", "tester", "--reason", "smtp down", in_process=False)
    assert paused.returncode == 0, paused.stderr
    assert "Paused queue mail (by tester since" in paused.stdout

    held = [jobqueue.enqueue("mail", ADD, {"a": i, "b": 1}) for i in range(3)]
    passed = [jobqueue.enqueue("other", ADD, {"a": i, "b": 2}) for i in range(3)]
    wait_for(lambda: succeeded(passed), timeout=60)
    # One more round of the other queue: claims after the paused queue's jobs were ready.
    later = [jobqueue.enqueue("other", ADD, {"a": i, "b": 3}) for i in range(2)]
    wait_for(lambda: succeeded(later), timeout=60)
    assert states(held) == [("ready", 0)] * 3

    status = cli("status", "--json", in_process=False)
    assert status.returncode == 0, status.stdout + status.stderr
    [mail] = [q for q in status.json()["queues"] if q["queue"] == "mail"]
    assert (mail["paused"], mail["paused_by"], mail["ready"], mail["unserved"]) == (
        True,
        "tester",
        3,
        False,
    )
    table = cli("status", in_process=False)
    assert "paused by tester since" in table.stdout

    resumed = cli("resume", "mail", in_process=False)
    assert (resumed.returncode, resumed.stdout.strip()) == (
        0,
        "Resumed queue mail; workers claim its jobs again.",
    )
    wait_for(lambda: succeeded(held), timeout=60)
    assert states(held) == [("succeeded", 1)] * 3
    assert not Pause.objects.exists()
    assert proc.poll() is None
