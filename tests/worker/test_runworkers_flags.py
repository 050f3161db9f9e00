"""``manage.py runworkers`` flag checking: a bad flag is a usage error that names the problem.

Each bad flag is tried twice: as a real process (exit status 2 and the message on stderr, what an
operator or a process manager sees) and through ``call_command`` (a ``CommandError``). Neither
writes a Worker row. These run on SQLite too: parsing fails before any database access.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

import jobqueue
from jobqueue.models import Job, Worker
from tests.conftest import requires_postgres, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

#: (argv, the flag the message must name, text the message must contain)
BAD_FLAGS = [
    (["--queues", ""], "--queues", "got ''"),
    (["--queues", "a,,b"], "--queues", "got 'a,,b'"),
    (["--queues", "bad name"], "--queues", "got 'bad name'"),
    (["--queues", "a,a"], "--queues", "queue named twice in 'a,a'"),
    (["--queues", "critical:0,bulk"], "--queues", "got 'critical:0'"),
    (["--queues", "critical:-2"], "--queues", "whole number from 1 to 1000"),
    (["--queues", "critical:6,bad name:2"], "--queues", "queue name must match"),
    (["--concurrency", "0"], "--concurrency", "got '0'"),
    (["--concurrency", "x"], "--concurrency", "got 'x'"),
    (["--lease", "-1"], "--lease", "got '-1'"),
    (["--grace", "nan"], "--grace", "got 'nan'"),
    (["--poll-interval", "0"], "--poll-interval", "got '0'"),
    (["--worker-id", "w" * 201], "--worker-id", "at most 200 characters"),
    (["--worker-id", "pod\x01a"], "--worker-id", "control character"),
    (["--worker-id", ""], "--worker-id", "expected a worker id, got ''"),
    (["--worker-id", " \t"], "--worker-id", "expected a worker id, got ' \\t'"),
]
IDS = [
    "queues-empty",
    "queues-empty-name",
    "queues-space",
    "queues-twice",
    "weight-0",
    "weight-negative",
    "weight-garbage",
    "concurrency-0",
    "concurrency-x",
    "lease-negative",
    "grace-nan",
    "poll-interval-0",
    "worker-id-long",
    "worker-id-control",
    "worker-id-empty",
    "worker-id-blank",
]


@pytest.mark.parametrize(("argv", "flag", "text"), BAD_FLAGS, ids=IDS)
def test_bad_flag_exits_2_naming_the_problem(workers, argv, flag, text):
    result = workers.run(*argv, "--burst", timeout=60)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert f"error: argument {flag}: " in result.stderr
    assert text in result.stderr
    assert "Traceback" not in result.stderr
    assert Worker.objects.count() == 0


# Not the worker-id cases in process: were their check to regress, the worker would start in the
# test process and retry its failing registration forever (the subprocess test has a timeout).
IN_PROCESS = [
    (case, name)
    for case, name in zip(BAD_FLAGS, IDS, strict=True)
    if not name.startswith("worker-id")
]


@pytest.mark.parametrize(
    ("argv", "flag", "text"), [c for c, _ in IN_PROCESS], ids=[n for _, n in IN_PROCESS]
)
def test_bad_flag_raises_command_error_in_process(argv, flag, text):
    with pytest.raises(CommandError) as raised:
        call_command("runworkers", *argv, "--burst")
    assert f"argument {flag}: " in str(raised.value)
    assert text in str(raised.value)
    assert Worker.objects.count() == 0


def test_unknown_database_alias_is_refused(workers):
    result = workers.run("--database", "nope", "--burst", timeout=60)
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "--database 'nope' is not in DATABASES" in result.stderr
    assert "Traceback" not in result.stderr
    assert Worker.objects.count() == 0


@requires_postgres()
def test_longest_worker_id_is_accepted(workers):
    """200 characters is the width of ``Worker.worker_id`` and ``Job.leased_by``: it fits."""
    result = workers.run("--worker-id", "w" * 200, "--queues", "cmd-empty", "--burst", timeout=60)
    assert result.returncode == 0, result.stderr
    assert f"worker {'w' * 200} stopped" in result.stderr


# -- SIGTERM at any moment of start-up exits 0 (issue 20) ----------------------------------


def _sigterm_held(pid: int) -> bool:
    """Return whether process ``pid`` blocks SIGTERM now (``SigBlk`` of /proc/PID/status)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    mask = next(line.split()[1] for line in status.splitlines() if line.startswith("SigBlk:"))
    return bool(int(mask, 16) & (1 << (signal.SIGTERM - 1)))


def _stop_during_start_up(workers, pause, monkeypatch, module, flags, moment):
    """Start ``python -m <module> runworkers``, SIGTERM it at ``moment``; return its exit status.

    ``held``: as soon as /proc shows SIGTERM blocked (the first statement of ``python -m
    jobqueue``; Django is still being imported). ``settings``/``models``: paused there by
    tests/testapp/startup_pause.py (before any app config exists / halfway through building the
    app registry). ``running``/``children started``: once the worker (supervisor) logged it.
    """
    if moment in {"settings", "models"}:
        monkeypatch.setenv("JOBQUEUE_TEST_PAUSE_DIR", str(pause))  # subprocesses inherit it
        monkeypatch.setenv("JOBQUEUE_TEST_PAUSE_AT", moment)
    proc = workers.start("--queues", "startup-stop", "-v", "2", *flags, module=module)
    if moment == "held":
        wait_for(lambda: _sigterm_held(proc.pid) or proc.poll() is not None, 120, interval=0.001)
        proc.send_signal(signal.SIGTERM)
    elif moment in {"settings", "models"}:
        # No handler of the worker is installed yet. The signal arrives there; then the
        # start-up goes on.
        wait_for(lambda: (pause / "paused").exists() or proc.poll() is not None, timeout=120)
        proc.send_signal(signal.SIGTERM)
        (pause / "go").touch()
    else:
        workers.wait_for_log(proc, "concurrency" if moment == "running" else "started worker")
        proc.send_signal(signal.SIGTERM)
    return workers.exit_code(proc, timeout=120)


@requires_postgres()
@pytest.mark.parametrize(
    ("module", "flags", "moment"),
    [
        ("jobqueue", (), "held"),
        ("jobqueue", (), "settings"),
        ("jobqueue", (), "models"),
        ("jobqueue", ("--processes", "2"), "held"),
        ("jobqueue", ("--processes", "2"), "settings"),
        ("django", (), "models"),
        ("django", (), "running"),
        ("django", ("--processes", "2"), "models"),
        ("django", ("--processes", "2"), "children started"),
    ],
    ids=[
        "python-m-jobqueue-alone-first-line",
        "python-m-jobqueue-alone-settings",
        "python-m-jobqueue-alone-app-registry",
        "python-m-jobqueue-supervisor-first-line",
        "python-m-jobqueue-supervisor-settings",
        "manage-py-alone-app-registry",
        "manage-py-alone-running",
        "manage-py-supervisor-app-registry",
        "manage-py-supervisor-running",
    ],
)
def test_sigterm_at_any_moment_of_start_up_exits_0(
    workers, tmp_path, monkeypatch, module, flags, moment
):
    job_id = jobqueue.enqueue("startup-stop", "tests.testapp.jobs.noop", {})
    code = _stop_during_start_up(workers, tmp_path, monkeypatch, module, flags, moment)
    assert code == 0, workers.log(workers.procs[-1])
    job = Job.objects.get(id=job_id)
    # Nothing lost: never claimed, or done once; never charged for the stop.
    assert (job.state, job.attempts) in {("ready", 0), ("succeeded", 1)}, workers.log(
        workers.procs[-1]
    )


@requires_postgres()
def test_manage_py_runworkers_is_unguarded_before_jobqueues_app_config(
    workers, tmp_path, monkeypatch
):
    # The window README and docs/deployment.md name for plain `manage.py runworkers` (and the
    # reason to deploy `python -m jobqueue runworkers`): the settings import comes before
    # jobqueue's code runs, so SIGTERM there is the default action.
    job_id = jobqueue.enqueue("startup-stop", "tests.testapp.jobs.noop", {})
    code = _stop_during_start_up(workers, tmp_path, monkeypatch, "django", (), "settings")
    assert code == -signal.SIGTERM, workers.log(workers.procs[-1])
    assert Job.objects.filter(id=job_id, state="ready", attempts=0).exists()


@pytest.mark.parametrize(
    ("env_settings", "flags"),
    [("site_proj.settings", []), (None, ["--settings", "site_proj.settings"])],
)
def test_python_m_jobqueue_away_from_the_project_says_where_to_run_it(
    tmp_path, env_settings, flags
):
    """``python -m jobqueue runworkers`` where the settings cannot be imported (run from the
    wrong directory) exits 1 with one line saying so, not a ModuleNotFoundError traceback
    (found in a release-candidate trial)."""
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    if env_settings:
        env["DJANGO_SETTINGS_MODULE"] = env_settings
    env["PYTHONPATH"] = str(Path(jobqueue.__file__).parent.parent)  # jobqueue, not the project
    done = subprocess.run(
        [sys.executable, "-m", "jobqueue", "runworkers", *flags],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "cannot import the settings module 'site_proj.settings'" in done.stderr
    assert "run it in the directory of manage.py" in done.stderr
    assert "Traceback" not in done.stderr


def test_python_m_jobqueue_without_settings_says_how_to_name_them(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env["PYTHONPATH"] = str(Path(jobqueue.__file__).parent.parent)
    done = subprocess.run(
        [sys.executable, "-m", "jobqueue", "runworkers"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "no Django settings: set DJANGO_SETTINGS_MODULE" in done.stderr
    assert "Traceback" not in done.stderr
