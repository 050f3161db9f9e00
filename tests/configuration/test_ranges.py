"""Hardening item 8: every duration, size and count setting and flag has one documented range.

The table is ``jobqueue.settings.ranges.RANGES``; ``conf.build_settings`` (so ``manage.py check``,
jobqueue.E001), the ``runworkers`` and ``prunejobs`` flags and the docs' settings table
(docs/settings.md) all follow it. Out-of-range values, NaN, infinity, negatives and huge
numbers are refused at start, naming the key or flag.
"""

from __future__ import annotations

import math
import re

import pytest
from django.core.management import CommandError, call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from jobqueue.checks import check_settings
from jobqueue.errors import JobQueueConfigurationError
from jobqueue.models import Job, Worker
from jobqueue.settings import ranges as limits
from jobqueue.settings.conf import build_settings
from tests.conftest import FAST_WORKER_SETTINGS, ROOT


def setting(key: str, value: object) -> dict:
    """Return a ``JOBQUEUE`` dict setting ``key`` (``BACKOFF.cap_seconds`` nests) to ``value``."""
    if key == "RETENTION":
        return {"RETENTION": {"succeeded": value}}
    if key == "RATE_LIMITS.rate":
        return {"RATE_LIMITS": {"type": {"t": {"rate": value}}}}
    if key == "RATE_LIMITS.burst":
        return {"RATE_LIMITS": {"type": {"t": {"rate": "1/s", "burst": value}}}}
    if "." in key:
        outer, inner = key.split(".")
        # The partner of a base/cap pair at the far end, so only `key` can be wrong.
        partner = {
            "BACKOFF.base_seconds": ("cap_seconds", limits.RANGES["BACKOFF.cap_seconds"].high),
            "BACKOFF.cap_seconds": ("base_seconds", 0.001),
            "BREAKER.cooldown_seconds": (
                "max_cooldown_seconds",
                limits.RANGES["BREAKER.max_cooldown_seconds"].high,
            ),
            "BREAKER.max_cooldown_seconds": ("cooldown_seconds", 0.01),
        }.get(key)
        return {outer: {inner: value, **(dict([partner]) if partner else {})}}
    if key in ("LEADER_LEASE_SECONDS", "SCHEDULER_INTERVAL_SECONDS"):
        # CRON_GRACE_SECONDS must cover lease + tick; give it room so only `key` is tested.
        return {key: value, "CRON_GRACE_SECONDS": limits.RANGES["CRON_GRACE_SECONDS"].high}
    if key == "CRON_GRACE_SECONDS":
        return {key: value, "LEADER_LEASE_SECONDS": 1, "SCHEDULER_INTERVAL_SECONDS": 0.01}
    return {key: value}


FLAG_ONLY = ("PRUNE_BATCH_SIZE", "PROCESSES", "MAX_TASKS", "MAX_MEMORY_PER_CHILD")
SETTING_KEYS = [key for key in limits.RANGES if key not in FLAG_ONLY]


def named(key: str) -> str:
    """How an error names ``key``: ``JOBQUEUE['BACKOFF']['cap_seconds']``."""
    if key == "RETENTION":
        return "JOBQUEUE['RETENTION']['succeeded']"
    if key.startswith("RATE_LIMITS."):
        return "JOBQUEUE['RATE_LIMITS']['type']['t']"
    return "JOBQUEUE" + "".join(f"[{part!r}]" for part in key.split("."))


def bad_values(limit: limits.Range) -> list[object]:
    below = limit.low - 1 if limit.integer else limit.low / 2 if limit.low else -0.5
    above = limit.high + 1 if limit.integer else limit.high * 2
    values: list[object] = [below, above, -1, 1e300, math.nan, math.inf, -math.inf, True, "1"]
    if limit.integer:
        values.append(float(limit.low))  # a count must be whole, not 1.0
    return values


@pytest.mark.parametrize("key", SETTING_KEYS)
def test_every_setting_refuses_values_outside_its_range_naming_the_key(key):
    limit = limits.RANGES[key]
    for value in bad_values(limit):
        with pytest.raises(JobQueueConfigurationError) as raised:
            build_settings(setting(key, value))
        message = str(raised.value)
        assert named(key) in message, (value, message)
        assert limit.describe() in message or not isinstance(value, int | float), message
    low = 1.01 if key == "CRON_GRACE_SECONDS" else limit.low  # >= leader lease + tick too
    for value in (low, limit.high):
        build_settings(setting(key, value))  # both ends are accepted


@pytest.mark.django_db(databases="__all__")
def test_the_issues_values_are_refused_and_manage_py_check_names_them():
    cases = {
        "LEASE_SECONDS": 1e300,  # looped forever as "database unavailable"
        "POLL_INTERVAL_SECONDS": 1e300,  # crashed with OverflowError
        "REAPER_INTERVAL_SECONDS": 1e300,  # turned the reaper off
    }
    cases_small = {"LEASE_SECONDS": 0.01}  # ran jobs twice
    for key, value in [*cases.items(), *cases_small.items()]:
        with override_settings(JOBQUEUE={key: value}):
            [error] = check_settings()
            with pytest.raises(SystemCheckError, match=re.escape(f"JOBQUEUE['{key}']")):
                call_command("check")
        assert error.id == "jobqueue.E001"
        assert f"JOBQUEUE['{key}']" in error.msg
        assert limits.RANGES[key].describe() in error.msg


def test_the_test_suites_fast_settings_are_within_range():
    build_settings(FAST_WORKER_SETTINGS)


def test_every_flag_takes_the_range_of_the_setting_it_overrides():
    assert set(limits.FLAGS.values()) <= set(limits.RANGES)
    for flag in ("--lease", "--poll-interval", "--grace", "--concurrency", "--processes"):
        assert flag in limits.FLAGS
    for flag in ("--older-than", "--batch-size"):
        assert flag in limits.FLAGS


RUNWORKERS_BAD = [
    ("--lease", "1e300"),
    ("--lease", "0.01"),
    ("--lease", "43201"),
    ("--poll-interval", "1e300"),
    ("--poll-interval", "0.001"),
    ("--grace", "inf"),
    ("--grace", "-1"),
    ("--grace", "86401"),
    ("--concurrency", "1001"),
    ("--concurrency", "1.5"),
    ("--processes", "257"),
    ("--processes", "0"),
    ("--max-tasks", "1000000001"),
    ("--max-tasks", "2.5"),
]


@pytest.mark.django_db
@pytest.mark.parametrize(("flag", "text"), RUNWORKERS_BAD)
def test_runworkers_refuses_out_of_range_flags_naming_the_flag_and_range(flag, text):
    with pytest.raises(CommandError) as raised:
        call_command("runworkers", flag, text, "--burst")
    message = str(raised.value)
    assert f"argument {flag}: " in message
    assert limits.RANGES[limits.FLAGS[flag]].describe() in message
    assert f"got {text!r}" in message
    assert Worker.objects.count() == 0


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("flag", "text"), [("--batch-size", "10001"), ("--batch-size", "0"), ("--older-than", "600w")]
)
def test_prunejobs_refuses_out_of_range_flags_and_deletes_nothing(flag, text):
    from tests.factories import make_job

    make_job(state="succeeded")
    argv = [flag, text] if flag == "--older-than" else [flag, text, "--older-than", "0s"]
    with pytest.raises(CommandError) as raised:
        call_command("prunejobs", *argv)
    assert f"argument {flag}: " in str(raised.value)
    assert limits.RANGES[limits.FLAGS[flag]].describe() in str(raised.value)
    assert Job.objects.count() == 1


def test_the_docs_settings_table_gives_every_settings_range():
    readme = (ROOT / "docs" / "settings.md").read_text()
    rows = {
        m.group(1): m.group(0)
        for m in re.finditer(r"^\| `([A-Z_]+)` \|.*$", readme, flags=re.MULTILINE)
    }
    for key, limit in limits.RANGES.items():
        top = key.split(".")[0]
        if top in FLAG_ONLY:
            continue  # flags only; the commands' help and docs/runworkers.md give them
        assert top in rows, key
        inner = key.split(".")[1] if "." in key else None
        expected = f"{inner} {limit.describe()}" if inner else limit.describe()
        assert expected in rows[top], (key, rows[top])
