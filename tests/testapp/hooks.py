"""Test hooks a worker subprocess installs when the test sets their environment variable.

Imported by ``jobs.py`` (which every worker autodiscovers). Production code never reads these
variables: it only runs ``jobqueue.store.bounded.HOOKS``, empty unless a test fills it.
"""

import os
import signal

from django.db import connections

from jobqueue.store import bounded
from jobqueue.store.postgres import PostgresStore

#: Path of a file: the worker's first capped claim writes "pid backend_pid" there, then the
#: process SIGSTOPs itself while it holds the claim turn (its transaction idle, lock held).
FREEZE_IN_CLAIM = "JQ_TEST_FREEZE_IN_CLAIM"


def _freeze_once(path: str):
    done: list[bool] = []

    def hook(alias: str) -> None:
        if done:
            return
        done.append(True)
        backend = connections[alias].connection.info.backend_pid
        with open(f"{path}.tmp", "w") as f:
            f.write(f"{os.getpid()} {backend}\n")
        os.replace(f"{path}.tmp", path)
        os.kill(os.getpid(), signal.SIGSTOP)

    return hook


if os.environ.get(FREEZE_IN_CLAIM):
    bounded.HOOKS["claim"] = _freeze_once(os.environ[FREEZE_IN_CLAIM])


#: Path of a directory: a worker kills itself with SIGKILL at the recording of a batch's last
#: outcome (test_process_batches.py), once per batch, as ``<dir>/mode`` says: ``before`` the
#: statement (the outcome is lost with the process: the lease's hand-back or expiry decides it
#: again), ``after`` it committed (the callback is in; nothing else the process would do runs),
#: or ``none``. ``<dir>/killed-<batch id>`` marks the batch whose kill happened.
KILL_AT_BATCH_END = "JQ_TEST_KILL_AT_BATCH_END"

_BATCH_COMPLETED_BY = """
SELECT b.id FROM jobqueue_batch AS b JOIN jobqueue_job AS j ON j.batch_id = b.id
WHERE j.id = ANY(%s) AND j.state = 'leased'
GROUP BY b.id, b.pending HAVING b.pending = count(*)
"""
_BATCH_COMPLETED = """
SELECT DISTINCT b.id FROM jobqueue_batch AS b JOIN jobqueue_job AS j ON j.batch_id = b.id
WHERE j.id = ANY(%s) AND b.pending = 0
"""


def _kill_once(directory: str, query: str, ids: list[int]) -> None:
    with connections["default"].cursor() as cursor:
        cursor.execute(query, [ids])
        batches = [row[0] for row in cursor.fetchall()]
    for batch_id in batches:
        try:
            os.close(os.open(f"{directory}/killed-{batch_id}", os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            continue
        os.kill(os.getpid(), signal.SIGKILL)


def _kill_at_batch_end(directory: str) -> None:
    original = PostgresStore.finish_many

    def finish_many(self, outcomes, now=None):
        try:
            with open(f"{directory}/mode") as f:
                mode = f.read().strip()
        except FileNotFoundError:
            mode = "none"
        finishing = [o.job_id for o in outcomes if o.state in ("succeeded", "dead")]
        if mode == "before" and finishing:
            _kill_once(directory, _BATCH_COMPLETED_BY, finishing)
        states = original(self, outcomes, now)
        if mode == "after" and finishing:
            _kill_once(directory, _BATCH_COMPLETED, finishing)
        return states

    PostgresStore.finish_many = finish_many


if os.environ.get(KILL_AT_BATCH_END):
    _kill_at_batch_end(os.environ[KILL_AT_BATCH_END])
