"""Pause a test's subprocess in the middle of Django's set-up, so a test can signal it there.

With ``JOBQUEUE_TEST_PAUSE_DIR`` set, importing this app's models (the app registry is half
built: jobqueue's app config exists, no ``ready()`` has run) writes ``paused`` in that directory
and waits until the test writes ``go``.
"""

import os
import time
from pathlib import Path


def pause_if_asked() -> None:
    directory = os.environ.get("JOBQUEUE_TEST_PAUSE_DIR")
    if not directory:
        return
    (Path(directory) / "paused").write_text(str(os.getpid()))
    deadline = time.monotonic() + 120
    while not (Path(directory) / "go").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
