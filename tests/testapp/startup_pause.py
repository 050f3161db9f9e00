"""Pause a test's subprocess at a named moment of its start-up, so a test can signal it there.

With ``JOBQUEUE_TEST_PAUSE_DIR`` set, the moment named by ``JOBQUEUE_TEST_PAUSE_AT`` (default
``models``) writes ``paused`` in that directory and waits until the test writes ``go``:

* ``settings``: importing the test settings (Django is imported, no app config exists yet);
* ``models``: importing this app's models (the app registry is half built: jobqueue's app config
  exists, no ``ready()`` has run).
"""

import os
import time
from pathlib import Path


def pause_if_asked(moment: str) -> None:
    directory = os.environ.get("JOBQUEUE_TEST_PAUSE_DIR")
    if not directory or os.environ.get("JOBQUEUE_TEST_PAUSE_AT", "models") != moment:
        return
    (Path(directory) / "paused").write_text(str(os.getpid()))
    deadline = time.monotonic() + 120
    while not (Path(directory) / "go").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
