"""Batches (issue 19): exactly one callback per batch whose members finish concurrently on 4
real worker processes, some killed with SIGKILL at the recording of the last outcome.

One ``runworkers --processes 4`` supervisor runs every trial (its children restart after a
kill, and it hands back a dead child's leases). Each trial is a 20-member batch; its mode says
what the child recording the batch's last outcome does (tests/testapp/hooks.py):

* ``none``: nothing;
* ``before``: dies just before the statement: the outcome is lost with the process, the
  hand-back (or the lease's expiry) decides it again, a rerun records it, and the callback comes
  with that later statement;
* ``after``: dies right after the statement committed: the callback came with it, and nothing
  else that process would have done is needed.

Every trial must end with the batch complete once and exactly one on_complete and one
on_success callback job, and the kills must have happened (a ``before`` kill can miss a trial
whose last two outcomes race: each statement then sees another member still pending).

Sized for a loaded 2-core machine: 24 trials here, 16 of them with a kill (~40 s: a ``before``
kill waits for the lost lease to be decided again, seconds), beside 50 in-process racing trials
in test_batches_concurrent.py, instead of the issue's 200 process trials (~6 minutes here).
"""

from __future__ import annotations

import random

import pytest

import jobqueue
from jobqueue.models import Job
from tests.conftest import FAST_WORKER_SETTINGS, requires_postgres, wait_for
from tests.testapp import jobs
from tests.testapp.hooks import KILL_AT_BATCH_END

pytestmark = [pytest.mark.slow, requires_postgres(), pytest.mark.django_db(transaction=True)]

REPORT = "tests.testapp.jobs.batch_report"
MEMBERS = 20
MODES = ["none", "before", "after"] * 8


def test_one_callback_per_batch_on_four_processes_with_sigkill_at_the_last_outcome(
    workers, tmp_path, monkeypatch
):
    monkeypatch.setenv(KILL_AT_BATCH_END, str(tmp_path))
    rng = random.Random(19)
    supervisor = workers.start(
        "--queues", "pq,default", "--processes", "4", settings=FAST_WORKER_SETTINGS
    )
    kills = dict.fromkeys(MODES, 0)
    for trial, mode in enumerate(MODES):
        (tmp_path / "mode").write_text(mode)
        with jobqueue.batch(on_success=REPORT, on_complete=REPORT, payload={"t": trial}) as b:
            b.enqueue_many(
                {
                    "queue": "pq",
                    "job_type": jobs.batch_member,
                    "payload": {"index": i, "sleep_s": rng.choice([0, 0, 0.01, 0.02])},
                }
                for i in range(MEMBERS)
            )

        def finished(batch_id=b.id) -> bool:
            if supervisor.poll() is not None:
                raise AssertionError(f"supervisor exited:\n{workers.log(supervisor)}")
            status = jobqueue.batch_status(batch_id)
            return (
                status.done
                and not Job.objects.filter(type=REPORT, payload__batch__id=batch_id)
                .exclude(state="succeeded")
                .exists()
            )

        wait_for(finished, timeout=180, interval=0.05)
        status = jobqueue.batch_status(b.id)
        fired = list(Job.objects.filter(type=REPORT, payload__batch__id=b.id))
        assert len(fired) == 2, f"trial {trial} ({mode}): {len(fired)} callbacks"
        assert {j.id for j in fired} == {status.success_job_id, status.complete_job_id}
        assert (status.completions, status.succeeded, status.pending) == (1, MEMBERS, 0)
        if (tmp_path / f"killed-{b.id}").exists():
            kills[mode] += 1
    # A "before" kill needs one statement to see that it holds every pending member: when the
    # last two finish at once on two processes, neither does, and that trial runs unharmed.
    assert kills["none"] == 0 and kills["before"] >= 2 and kills["after"] >= 5, kills
