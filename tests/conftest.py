"""Shared fixtures: stores for both backends, and real worker processes on the test database."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.db import connections

from jobqueue import registry
from jobqueue.store.postgres import jobs as postgres_jobs
from tests import pooler_stage
from tests.pgcluster import PrivateCluster

ROOT = Path(__file__).resolve().parent.parent

#: Worker settings for process tests: short leases, fast polling and reaping, tiny fixed backoff,
#: so a lease expiry plus a retry takes about two seconds instead of a minute.
FAST_WORKER_SETTINGS: dict[str, object] = {
    "LEASE_SECONDS": 1.5,
    "REAPER_INTERVAL_SECONDS": 0.3,
    "POLL_INTERVAL_SECONDS": 0.1,
    "BACKOFF": {"policy": "none", "base_seconds": 0.1, "cap_seconds": 0.1},
}


@pytest.fixture(autouse=True)
def _forget_claimed_concurrency_keys() -> Iterator[None]:
    """Each test starts as a fresh process: no database known to hold concurrency-keyed jobs.

    The PostgreSQL store remembers, process-wide, an alias whose claims returned a keyed job
    (they take turns from then on: one more statement per claim). Left over from another test,
    it would change what a test of the claim's statements counts.
    """
    yield
    postgres_jobs._KEYED_SEEN.clear()


@pytest.fixture(scope="session", autouse=True)
def _pooler_stage(request: pytest.FixtureRequest) -> Iterator[None]:
    """In the pooler stage, let PgBouncer go of the test database before it is dropped."""
    if not os.environ.get("JOBQUEUE_TEST_POOLER"):
        yield
        return
    request.getfixturevalue("django_db_setup")
    yield
    connections.close_all()
    pooler_stage.release(connections["default"].settings_dict["NAME"])


@pytest.fixture
def no_declared_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    """The job type registry without the types that declare a rate or concurrency limit.

    A type registered with a limit changes every later claim of its process (the claim takes
    turns, spends tokens: more statements), and modules that declare such types stay imported
    for the rest of an xdist worker's tests. Tests that count a claim's statements use this.
    """
    plain = {
        name: t
        for name, t in registry._registry.items()
        if t.rate_limit is None and t.concurrency_limit is None and t.concurrency_key is None
    }
    monkeypatch.setattr(registry, "_registry", plain)


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
        if conn.is_in_memory_db():
            # A subprocess cannot share this process's in-memory database; give it an empty
            # one of its own, enough for commands that fail before touching tables.
            return "sqlite://:memory:"
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
        self,
        *args: str,
        settings: dict | None = None,
        log_name: str | None = None,
        module: str = "django",
    ) -> subprocess.Popen:
        """Start ``python -m <module> runworkers *args``; its output goes to ``proc.log_path``."""
        log = self.tmp_path / (log_name or f"worker-{len(self.procs)}.log")
        with log.open("ab") as out:  # the child keeps its own copy of the descriptor
            proc = subprocess.Popen(
                [sys.executable, "-m", module, "runworkers", *args],
                cwd=ROOT,
                env=subprocess_env(**(settings or {})),
                stdout=out,
                stderr=subprocess.STDOUT,
                # Its own process group, so cleanup also reaches a supervisor's children.
                start_new_session=True,
            )
        proc.log_path = log  # type: ignore[attr-defined]
        self.procs.append(proc)
        return proc

    @staticmethod
    def log(proc: subprocess.Popen) -> str:
        """Return what ``proc`` has written so far (stdout and stderr, interleaved)."""
        return proc.log_path.read_text(errors="replace")  # type: ignore[attr-defined]

    def wait_for_log(self, proc: subprocess.Popen, text: str, timeout: float = 30.0) -> str:
        """Wait until ``text`` appears in ``proc``'s log; fail with the log if the process exits."""

        def seen() -> bool:
            if text in self.log(proc):
                return True
            if proc.poll() is not None and text not in self.log(proc):
                raise AssertionError(
                    f"worker exited ({proc.returncode}) before logging {text!r}:\n{self.log(proc)}"
                )
            return False

        wait_for(seen, timeout=timeout)
        return self.log(proc)

    def exit_code(self, proc: subprocess.Popen, timeout: float = 30.0) -> int:
        """Wait for ``proc`` to exit and return its status; fail with its log on timeout."""
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"worker {proc.pid} still running after {timeout} s:\n{self.log(proc)}"
            ) from None

    def run(
        self, *args: str, settings: dict | None = None, timeout: float = 60
    ) -> subprocess.CompletedProcess:
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
            try:
                if os.getpgid(proc.pid) == proc.pid:
                    # Its own group (start_new_session): a supervisor's children go too.
                    os.killpg(proc.pid, signal.SIGKILL)
                else:
                    proc.kill()
            except (ProcessLookupError, PermissionError):
                pass
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


def record_lines(path: Path) -> list[list[str]]:
    """Return the lines the recording handlers wrote (``job_id attempt pid [note]``), split."""
    try:
        return [line.split() for line in Path(path).read_text().splitlines() if line.strip()]
    except FileNotFoundError:
        return []


# -- a private PostgreSQL cluster, for tests that stop or restart the server ---------------------


@contextmanager
def running_cluster() -> Iterator[PrivateCluster]:
    """Yield a started private cluster (tests/pgcluster.py), destroyed afterwards.

    Skips the test when this machine cannot make one (no PostgreSQL server binaries).
    """
    try:
        cluster = PrivateCluster()
    except (RuntimeError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"cannot make a private PostgreSQL cluster: {exc}")
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.destroy()


@pytest.fixture
def private_cluster() -> Iterator[PrivateCluster]:
    """A private PostgreSQL cluster of this test's own: see :func:`running_cluster`."""
    with running_cluster() as cluster:
        yield cluster


def migrated_database(
    cluster: PrivateCluster, name: str, **jobqueue_settings: object
) -> tuple[str, dict[str, str]]:
    """Create database ``name`` on ``cluster`` and migrate it (in a subprocess).

    Returns:
        Its URL, and the environment of a subprocess that uses it with ``jobqueue_settings``.
    """
    url = cluster.create_database(name)
    env = subprocess_env(**jobqueue_settings)
    env["DATABASE_URL"] = url
    subprocess.run(
        [sys.executable, "-m", "django", "migrate", "-v", "0"], env=env, cwd=ROOT, check=True
    )
    return url, env


def start_runworkers(env: dict[str, str], logs: list[Path], *args: str) -> list[subprocess.Popen]:
    """Start one ``runworkers`` process per log file, with ``env``, each writing to its log.

    For a private cluster's database (``WorkerProcesses`` serves the test database); the caller
    stops the processes.
    """
    cmd = [sys.executable, "-m", "django", "runworkers", *args]
    return [
        subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=log.open("wb"), stderr=subprocess.STDOUT)
        for log in logs
    ]
