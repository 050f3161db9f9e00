"""Test hooks a worker subprocess installs when the test sets their environment variable.

Imported by ``jobs.py`` (which every worker autodiscovers). Production code never reads these
variables: it only runs ``jobqueue.store.bounded.HOOKS``, empty unless a test fills it.
"""

import os
import signal

from django.db import connections

from jobqueue.store import bounded

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
