"""Run a Django management command with this process's wall clock skewed (issue 32 item 4).

``python -m tests.skewed_clock runworkers ...`` with ``JOBQUEUE_TEST_CLOCK_SKEW_S`` set (seconds,
positive: ahead of the database, negative: behind) shifts ``time.time``, ``datetime.now`` and
friends with time-machine, as a worker host whose clock is off would be; ``time.monotonic`` is
left alone, as the kernel leaves it. The database's clock is untouched.
"""

from __future__ import annotations

import os
import sys
import time

import time_machine


def main() -> None:
    """Shift the clock by ``JOBQUEUE_TEST_CLOCK_SKEW_S`` seconds and run the command in argv."""
    skew_s = float(os.environ["JOBQUEUE_TEST_CLOCK_SKEW_S"])
    time_machine.travel(time.time() + skew_s, tick=True).start()
    from django.core.management import execute_from_command_line

    execute_from_command_line(["manage.py", *sys.argv[1:]])


if __name__ == "__main__":
    main()
