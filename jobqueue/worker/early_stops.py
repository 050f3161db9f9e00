"""Internal: SIGTERM held from the first line of a ``runworkers`` process until it can stop.

A SIGTERM sent while a worker process is still starting (systemd and Kubernetes stop a process
at any moment) would kill it with status -15 before the worker has installed its handlers. This
module blocks SIGTERM instead: a blocked signal stays pending, and the worker (or the
supervisor) unblocks it once its handlers are in place, when it is a stop like any other: the
process has claimed nothing, so it exits 0. The block is inherited across ``exec``, so a recycle
in place keeps it.

It imports only the standard library's ``signal`` and ``threading``: ``python -m jobqueue``
(``jobqueue/__main__.py``) calls it before importing Django, so that the only moments left
unguarded are the interpreter's own start-up (before any Python code runs).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Sequence

__all__ = ["hold_stops_during_start_up"]


def hold_stops_during_start_up(argv: Sequence[str]) -> None:
    """Hold SIGTERM in a ``runworkers`` process until its worker (or supervisor) handles it.

    Called first thing by ``python -m jobqueue`` and again (earliest moment jobqueue's code runs
    under ``manage.py``) as Django builds the app registry. A SIGTERM sent meanwhile waits,
    blocked, instead of killing the process with status -15; it is then a drain of a process
    that claimed nothing, and the process exits 0. Does nothing in any other command, or outside
    the main thread; calling it twice is harmless.

    Args:
        argv: the process's command line (``sys.argv``); ``argv[1]`` names the command.
    """
    if list(argv[1:2]) != ["runworkers"]:
        return
    if threading.current_thread() is not threading.main_thread():
        return
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
