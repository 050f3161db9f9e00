"""A database outage gives ``QueueUnavailable`` from every public function that talks to it,
inside the caller's ``transaction.atomic()`` as well as outside one.

Runs on a private cluster (tests/pgcluster.py): each call meets a server that was stopped after
the caller's connection was opened, as a real outage does. Before the fix, a call inside
``atomic()`` raised Django's ``OperationalError`` (the block's exit reconnected to roll back,
failed, and replaced the error), and ``cancel``, ``retry``, ``run_now``... raised it everywhere.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT, migrated_database, running_cluster

pytestmark = pytest.mark.slow

CALLS = {
    "enqueue": "jobqueue.enqueue('q', 'tests.testapp.jobs.noop', {})",
    "enqueue_many": "jobqueue.enqueue_many([{'queue': 'q', 'job_type': 'tests.jobs.x'}])",
    "claim": "jobqueue.claim('q', 'w', 1)",
    "heartbeat": "jobqueue.heartbeat(leased, token)",
    "ack": "jobqueue.ack(leased, token)",
    "nack": "jobqueue.nack(leased, token, 'boom')",
    "cancel": "jobqueue.cancel(dead)",
    "retry": "jobqueue.retry(dead)",
    "retry_many": "jobqueue.retry_many([dead])",
    "run_now": "jobqueue.run_now(dead)",
}

# Reads a call name per line; opens a connection, says READY, waits for the server to be stopped
# (a second line), makes the call (in atomic() or not) and prints the exception's class.
SCRIPT = """
import sys, uuid
import django
django.setup()
from django.db import connection, transaction
import jobqueue
from tests.factories import make_job
dead = make_job('dead').id
leased_job = make_job('leased')
leased, token = leased_job.id, leased_job.lease_token
calls = {calls!r}
print('SETUP', flush=True)
for line in sys.stdin:
    name, mode = line.split()
    connection.ensure_connection()
    print('READY', flush=True)
    sys.stdin.readline()
    try:
        if mode == 'atomic':
            with transaction.atomic():
                eval(calls[name])
        else:
            eval(calls[name])
        print('RESULT none', flush=True)
    except Exception as exc:
        print('RESULT', type(exc).__module__ + '.' + type(exc).__qualname__, flush=True)
    connection.close()
"""


@pytest.fixture(scope="module")
def cluster():
    # One cluster for the module: each test makes its own database on it.
    with running_cluster() as found:
        yield found


def start_script(cluster, name: str, script: str) -> subprocess.Popen:
    """Migrate database ``name`` on ``cluster`` and start ``script`` on it, lines in and out."""
    _, env = migrated_database(cluster, name)
    return subprocess.Popen(
        [sys.executable, "-c", script],
        env=env,
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_every_public_function_raises_queue_unavailable_in_an_outage(cluster):
    proc = start_script(cluster, "jq_outage", SCRIPT.format(calls=CALLS))
    seen: dict[tuple[str, str], str] = {}
    try:
        assert proc.stdout.readline().strip() == "SETUP"
        for mode in ("atomic", "autocommit"):
            for name in CALLS:
                proc.stdin.write(f"{name} {mode}\n")
                proc.stdin.flush()
                ready = proc.stdout.readline()
                assert ready.strip() == "READY", ready + proc.stdout.read()
                cluster.stop()
                proc.stdin.write("go\n")
                proc.stdin.flush()
                result = proc.stdout.readline().split()
                assert result and result[0] == "RESULT", result
                seen[name, mode] = result[1]
                cluster.start()
    finally:
        proc.kill()
        proc.wait(timeout=30)
    expected = {key: "jobqueue.errors.QueueUnavailable" for key in seen}
    assert len(seen) == 2 * len(CALLS)
    assert seen == expected


# Per call: opens a connection with fresh jobs to act on, says READY, waits for the server to be
# stopped, makes the call outside atomic() (QueueUnavailable expected), says so, waits for the
# server to be back, and makes the same call again on the same connection object, as a script or
# a consumer loop does: no request boundary closes the dead connection for it. Before the fix,
# that second call raised QueueUnavailable ("the connection is closed") for every function.
RECOVERY_SCRIPT = """
import sys
import django
django.setup()
from django.db import connection
import jobqueue
from tests.factories import make_job
NOOP = 'tests.testapp.jobs.noop'
calls = {calls!r}
print('SETUP', flush=True)
for line in sys.stdin:
    name = line.strip()
    connection.close()  # each call starts afresh, whatever the one before left behind
    dead = make_job('dead').id
    leased_job = make_job('leased')
    leased, token = leased_job.id, leased_job.lease_token
    print('READY', flush=True)
    for phase in ('down', 'up'):
        sys.stdin.readline()
        try:
            eval(calls[name])
            print('RESULT none', flush=True)
        except Exception as exc:
            kind = type(exc).__module__ + '.' + type(exc).__qualname__
            print('RESULT', kind, repr(str(exc))[:300], flush=True)
"""

#: The calls again, each one that can succeed on a job made for it (a registered job type).
RECOVERY_CALLS = {
    **CALLS,
    "enqueue_many": "jobqueue.enqueue_many([{'queue': 'q', 'job_type': NOOP}])",
}


def test_after_an_outage_the_next_call_outside_atomic_reconnects(cluster):
    proc = start_script(cluster, "jq_outage_recovery", RECOVERY_SCRIPT.format(calls=RECOVERY_CALLS))
    down: dict[str, str] = {}
    up: dict[str, str] = {}
    try:
        assert proc.stdout.readline().strip() == "SETUP"
        for name in RECOVERY_CALLS:
            proc.stdin.write(f"{name}\n")
            proc.stdin.flush()
            ready = proc.stdout.readline()
            assert ready.strip() == "READY", ready + proc.stdout.read()
            cluster.stop()
            proc.stdin.write("go\n")
            proc.stdin.flush()
            result = proc.stdout.readline().split(maxsplit=1)
            assert result and result[0] == "RESULT", result
            down[name] = result[1].split()[0]
            cluster.start()
            proc.stdin.write("go\n")
            proc.stdin.flush()
            result = proc.stdout.readline().split(maxsplit=1)
            assert result and result[0] == "RESULT", result
            up[name] = result[1].strip()
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert down == {name: "jobqueue.errors.QueueUnavailable" for name in RECOVERY_CALLS}
    assert up == {name: "none" for name in RECOVERY_CALLS}
