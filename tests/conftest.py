"""Shared fixtures: stores for both backends, and real worker processes on the test database."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.db import connections

ROOT = Path(__file__).resolve().parent.parent


def requires_postgres() -> pytest.MarkDecorator:
    """Skip unless the default database is PostgreSQL."""
    from django.conf import settings

    engine = settings.DATABASES["default"]["ENGINE"]
    return pytest.mark.skipif(
        "postgresql" not in engine, reason="needs PostgreSQL as the default database"
    )


def database_url(alias: str = "default") -> str:
    """Return a DATABASE_URL for the *test* database of ``alias`` (what subprocesses must use)."""
    conn = connections[alias]
    s = conn.settings_dict
    if conn.vendor == "sqlite":
        return f"sqlite:///{s['NAME']}"
    user = s.get("USER") or ""
    password = f":{s['PASSWORD']}" if s.get("PASSWORD") else ""
    auth = f"{user}{password}@" if user else ""
    port = f":{s['PORT']}" if s.get("PORT") else ""
    return f"postgres://{auth}{s.get('HOST') or ''}{port}/{s['NAME']}"


def subprocess_env(alias: str = "default", **jobqueue_settings: object) -> dict[str, str]:
    """Return the environment a subprocess needs to use this test run's database and settings."""
    import json

    env = dict(os.environ)
    env["DATABASE_URL"] = database_url(alias)
    env["DJANGO_SETTINGS_MODULE"] = "tests.settings"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    if jobqueue_settings:
        env["JOBQUEUE_SETTINGS"] = json.dumps(jobqueue_settings)
    return env


class WorkerProcesses:
    """Start ``runworkers`` subprocesses against the test database, and always clean them up."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.procs: list[subprocess.Popen] = []

    def start(
        self, *args: str, settings: dict | None = None, log_name: str | None = None
    ) -> subprocess.Popen:
        log = self.tmp_path / (log_name or f"worker-{len(self.procs)}.log")
        proc = subprocess.Popen(
            [sys.executable, "-m", "django", "runworkers", *args],
            cwd=ROOT,
            env=subprocess_env(**(settings or {})),
            stdout=log.open("ab"),
            stderr=subprocess.STDOUT,
        )
        proc.log_path = log  # type: ignore[attr-defined]
        self.procs.append(proc)
        return proc

    def run(self, *args: str, settings: dict | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
        """Run ``runworkers`` to completion (e.g. with --burst) and return the result."""
        return subprocess.run(
            [sys.executable, "-m", "django", "runworkers", *args],
            cwd=ROOT,
            env=subprocess_env(**(settings or {})),
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[WorkerProcesses]:
    """Real ``runworkers`` processes on the test database; killed at the end of the test."""
    procs = WorkerProcesses(tmp_path)
    try:
        yield procs
    finally:
        procs.stop_all()


def wait_for(predicate: Callable[[], object], timeout: float = 30.0, interval: float = 0.05):
    """Poll ``predicate`` until it returns something truthy; fail the test after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s: {predicate}")
        time.sleep(interval)
