"""Bad input at every entry point gives a clear error naming what is wrong, and writes nothing.

One table per entry point: the Python API, the runworkers flags, the JOBQUEUE setting. Each row
is (what is wrong, the call, the exception, words the message must contain).
"""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime
from decimal import Decimal

import pytest
from django.db import transaction
from django.test import override_settings

import jobqueue
from jobqueue.errors import (
    InvalidJobOption,
    InvalidPayload,
    JobNotFound,
    JobQueueConfigurationError,
)
from jobqueue.models import Job, Worker
from jobqueue.settings.conf import build_settings
from tests.conftest import ROOT, subprocess_env
from tests.testapp import jobs

NOOP = "tests.testapp.jobs.noop"

API_CASES = [
    (
        "payload not JSON",
        lambda: jobqueue.enqueue("q", NOOP, {"at": datetime(2030, 1, 1)}),
        InvalidPayload,
        "payload['at']",
    ),
    (
        "Decimal deep inside",
        lambda: jobqueue.enqueue("q", NOOP, {"a": [1, {"p": Decimal("1")}]}),
        InvalidPayload,
        "payload['a'][1]['p']",
    ),
    (
        "NUL in a string",
        lambda: jobqueue.enqueue("q", NOOP, {"s": "a\x00b"}),
        InvalidPayload,
        "NUL",
    ),
    ("NaN", lambda: jobqueue.enqueue("q", NOOP, {"x": float("nan")}), InvalidPayload, "nan"),
    (
        "payload not a dict",
        lambda: jobqueue.enqueue("q", NOOP, [1, 2]),
        InvalidJobOption,
        "payload",
    ),
    (
        "naive run_at",
        lambda: jobqueue.enqueue("q", NOOP, {}, run_at=datetime(2030, 1, 1)),
        InvalidJobOption,
        "naive",
    ),
    (
        "negative delay",
        lambda: jobqueue.enqueue("q", NOOP, {}, delay=-1),
        InvalidJobOption,
        "delay",
    ),
    (
        "run_at and delay",
        lambda: jobqueue.enqueue("q", NOOP, {}, delay=1, run_at=datetime(2030, 1, 1)),
        InvalidJobOption,
        "not both",
    ),
    (
        "max_attempts 0",
        lambda: jobqueue.enqueue("q", NOOP, {}, max_attempts=0),
        InvalidJobOption,
        "max_attempts",
    ),
    (
        "priority 101",
        lambda: jobqueue.enqueue("q", NOOP, {}, priority=101),
        InvalidJobOption,
        "-100..100",
    ),
    (
        "queue with a space",
        lambda: jobqueue.enqueue("a queue", NOOP, {}),
        InvalidJobOption,
        "queue name",
    ),
    ("empty job type", lambda: jobqueue.enqueue("q", "", {}), InvalidJobOption, "job_type"),
    # A @job function's own enqueue refuses an empty queue as enqueue() does (it ran on the
    # type's default queue instead: a trial found it).
    (
        "empty queue on a @job's enqueue",
        lambda: jobs.add.enqueue(a=1, b=2, queue=""),
        InvalidJobOption,
        "queue name",
    ),
    (
        "timeout 0",
        lambda: jobqueue.enqueue("q", NOOP, {}, timeout_s=0),
        InvalidJobOption,
        "timeout_s",
    ),
    # Issue 33: the range of JOBQUEUE["TIMEOUT_SECONDS"] (limits.py), not just "> 0".
    (
        "timeout 1e308",
        lambda: jobqueue.enqueue("q", NOOP, {}, timeout_s=1e308),
        InvalidJobOption,
        "timeout_s: must be a number in 0.01..604800 seconds, got 1e+308",
    ),
    (
        "timeout past a week",
        lambda: jobqueue.enqueue_many([{"queue": "q", "job_type": NOOP, "timeout_s": 604_801}]),
        InvalidJobOption,
        "0.01..604800 seconds",
    ),
    # Issue 33: an int key past Python's int-to-text limit raised a bare ValueError.
    (
        "huge int key",
        lambda: jobqueue.enqueue("q", NOOP, {"a": {10**5000: 1}}),
        InvalidPayload,
        "payload['a'][<an integer key of 16610 bits>]",
    ),
    ("claim 0 jobs", lambda: jobqueue.claim("q", "w", 0), InvalidJobOption, "max_jobs"),
    ("unknown job id to cancel", lambda: jobqueue.cancel(10**12), JobNotFound, "no job"),
    ("unknown job id to retry", lambda: jobqueue.retry(10**12), JobNotFound, "no job"),
]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("case", "call", "error", "words"), API_CASES, ids=[c[0] for c in API_CASES]
)
def test_api_refuses_bad_input_and_writes_nothing(case, call, error, words):
    with transaction.atomic():
        with pytest.raises(error) as excinfo:
            call()
        assert words in str(excinfo.value)
        # The caller's transaction is still usable: nothing reached the database.
        assert Job.objects.count() == 0


FLAG_CASES = [
    ("empty queues", ["--queues", ""], "--queues"),
    ("queue list with a hole", ["--queues", "a,,b"], "--queues"),
    ("concurrency 0", ["--concurrency", "0"], "--concurrency"),
    ("processes -1", ["--processes", "-1"], "--processes"),
    ("lease not a number", ["--lease", "soon"], "--lease"),
    ("grace negative", ["--grace", "-5"], "--grace"),
    ("unknown flag", ["--frobnicate"], "unrecognized arguments"),
]


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("case", "args", "words"), FLAG_CASES, ids=[c[0] for c in FLAG_CASES])
def test_runworkers_refuses_bad_flags(case, args, words):
    result = subprocess.run(
        [sys.executable, "-m", "django", "runworkers", *args],
        cwd=ROOT,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=300,  # a hang guard only: a loaded machine may take a minute to start Django
    )
    assert result.returncode == 2, result.stderr
    assert words in result.stderr
    assert Worker.objects.count() == 0


SETTINGS_CASES = [
    ("unknown key", {"LEASE_SECOND": 5}, "LEASE_SECOND"),
    ("lease zero", {"LEASE_SECONDS": 0}, "LEASE_SECONDS"),
    ("max attempts text", {"MAX_ATTEMPTS": "8"}, "MAX_ATTEMPTS"),
    ("unknown backoff policy", {"BACKOFF": {"policy": "random"}}, "policy"),
    ("cap below base", {"BACKOFF": {"base_seconds": 10, "cap_seconds": 1}}, "cap_seconds"),
    ("queues not a list", {"QUEUES": "default"}, "QUEUES"),
]


@pytest.mark.parametrize(
    ("case", "value", "words"), SETTINGS_CASES, ids=[c[0] for c in SETTINGS_CASES]
)
def test_settings_refuse_bad_values_naming_the_key(case, value, words):
    with pytest.raises(JobQueueConfigurationError) as excinfo:
        build_settings(value)
    assert words in str(excinfo.value)


@pytest.mark.django_db
def test_enqueue_under_bad_settings_raises_and_writes_nothing():
    with override_settings(JOBQUEUE={"MAX_PAYLOAD_BYTE": 10}):
        with pytest.raises(JobQueueConfigurationError, match="MAX_PAYLOAD_BYTE"):
            jobqueue.enqueue("q", NOOP, {})
    assert Job.objects.count() == 0
