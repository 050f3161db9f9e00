"""Retake the docs' admin pictures (docs/images/*.png) from the running admin.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/jobqueue .venv/bin/python docs/screenshots.py

Runs the two picture-taking browser tests (``tests/admin/test_screenshots.py``: dashboard, job
list, job page, dead letters; ``tests/admin/test_charts_browser.py``: the charts) with
``JOBQUEUE_UPDATE_DOCS_IMAGES=1``, which lets them replace the files in ``docs/images/``. Needs
what the browser tests need: Debian's ``chromium`` (``apt-get install chromium``) and the ``dev``
extra (Playwright); they use no internet. Run it before a release, and look at the pictures
before committing them.
"""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = [
    "tests/admin/test_screenshots.py",
    "tests/admin/test_charts_browser.py::test_charts_draw_the_rollup_for_the_last_hour_and_day",
]


def main() -> int:
    """Run the picture-taking tests; return pytest's exit status."""
    if not Path(os.environ.get("JOBQUEUE_CHROMIUM", "/usr/bin/chromium")).exists():
        print("docs/screenshots.py: no Chromium (apt-get install chromium)", file=sys.stderr)
        return 1
    env = {**os.environ, "JOBQUEUE_UPDATE_DOCS_IMAGES": "1"}
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs", *TESTS]
    done = subprocess.run(cmd, cwd=ROOT, env=env, check=False)
    if done.returncode == 0:
        print(f"pictures written to {ROOT / 'docs' / 'images'}")
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
