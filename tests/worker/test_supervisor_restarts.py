"""The supervisor's restart delay (issue 32 item 1), without a database: a real supervisor in a
subprocess whose children die at once, either before they serve (a crash loop at start-up: the
delay doubles) or after (``mark_served``, as the claim loop calls it: replaced at once).

Progress is the supervisor's own count of deaths in its log; the guard only bounds a hang.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import ROOT, subprocess_env

SCRIPT = """
import os, signal, sys
import django
django.setup()
from jobqueue.worker.served import mark_served
from jobqueue.worker.supervisor import Supervisor

served = sys.argv[1] == "served"

def run_worker(slot, worker_id):
    if served:
        mark_served()
    if sys.argv[2] == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    return 1

Supervisor(
    processes=1,
    run_worker=run_worker,
    grace_s=1,
    worker_id_for=lambda slot, pid, nonce: f"w{slot}-{pid}",
).run()
"""


def supervise(served: str, how: str, deaths: int) -> str:
    """Run the supervisor until its log counts ``deaths`` deaths; return the log."""
    proc = subprocess.Popen(
        [sys.executable, "-u", "-c", SCRIPT, served, how],
        cwd=ROOT,
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + 120  # bounds a hang only
    try:
        while sum("deaths by cause" in line for line in lines) < deaths:
            assert time.monotonic() < deadline, "".join(lines)
            line = proc.stdout.readline()
            assert line, "".join(lines)
            lines.append(line)
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    return "".join(lines)


def test_a_child_that_dies_before_it_serves_is_restarted_after_a_doubling_delay():
    log = supervise("never", "exit", 4)
    assert "exited with status 1 after" in log, log
    for n, delay in ((1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0)):
        assert f"before it served ({n} such death(s) in a row); restarting in {delay:.1f} s" in log
    assert "deaths by cause: exit status 1: 4" in log, log


@pytest.mark.parametrize(("how", "cause"), [("exit", "exit status 1"), ("kill", "SIGKILL")])
def test_a_child_that_served_is_replaced_at_once_and_its_death_counted_by_cause(how, cause):
    log = supervise("served", how, 6)
    assert log.count("it had served: replacing it now") >= 6, log
    assert "restarting in" not in log, log
    assert f"deaths by cause: {cause}: 6" in log, log
