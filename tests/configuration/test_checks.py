"""System checks: each fires on a bad configuration, with its id and a hint, and is silent on a
good one. Also job discovery (``DISCOVER_MODULES``), which ``ready()`` reads.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys

import pytest
from django.apps import apps
from django.core import checks as django_checks
from django.core.management import call_command
from django.core.management.base import CommandError, SystemCheckError
from django.db import connection
from django.test import override_settings
from django.utils.module_loading import autodiscover_modules

import jobqueue
from jobqueue import checks
from jobqueue.errors import JobQueueConfigurationError
from jobqueue.settings.conf import build_settings
from tests.conftest import ROOT

BACKEND = "jobqueue.backends.JobQueueBackend"

# `manage.py check` runs Django's own checks too, and some of them read the database.
pytestmark = pytest.mark.django_db


def ids(messages) -> list[str]:
    assert all(m.hint for m in messages), "every jobqueue check message has a hint"
    return [m.id for m in messages]


def test_the_test_settings_pass_manage_py_check():
    call_command("check", databases=["default"])  # warnings (W001 on SQLite) do not raise


@pytest.mark.django_db(databases="__all__")  # the model checks ask each database's features
def test_runworkers_runs_the_checks_of_what_a_worker_uses_not_the_webs():
    def web_only(**kwargs):
        return [django_checks.Error("a URL error", hint="fix the URLconf", id="tests.E900")]

    django_checks.register(web_only, django_checks.Tags.urls)
    try:
        # `check` (at deploy) reports it; a worker gets past its checks, into its own start
        # (here refused for its --database flag, after the checks).
        with pytest.raises(SystemCheckError, match=r"tests\.E900"):
            call_command("check", databases=["default"])
        with pytest.raises(CommandError, match="not in DATABASES"):
            call_command("runworkers", "--database", "nope", "--burst", skip_checks=False)
    finally:
        django_checks.registry.registry.registered_checks.discard(web_only)
    # jobqueue's own checks still stop a worker, and have a tag of their own.
    with override_settings(JOBQUEUE={"LEASE_SECOND": 30}):
        with pytest.raises(SystemCheckError, match=r"jobqueue\.E001"):
            call_command("runworkers", "--database", "nope", "--burst", skip_checks=False)
        with pytest.raises(SystemCheckError, match=r"jobqueue\.E001"):
            call_command("check", "--tag", "jobqueue", databases=["default"])


# -- E001: JOBQUEUE ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        {"LEASE_SECOND": 30},
        {"MAX_ATTEMPTS": 0},
        {"BACKOFF": {"policy": "sometimes"}},
        {"DISCOVER_MODULES": "jobs"},
        {"DISCOVER_MODULES": ["jobs", "not a module"]},
    ],
)
def test_an_invalid_jobqueue_setting_is_e001(bad):
    with override_settings(JOBQUEUE=bad):
        [message] = checks.check_settings()
        assert ids([message]) == ["jobqueue.E001"]
        with pytest.raises(SystemCheckError, match=r"jobqueue\.E001"):
            call_command("check", databases=["default"])


def test_a_valid_jobqueue_setting_is_silent():
    good = {"MAX_ATTEMPTS": 3, "DISCOVER_MODULES": ["jobs", "background.handlers"]}
    with override_settings(JOBQUEUE=good):
        assert checks.check_settings() == []


# -- W001: the database --------------------------------------------------------------------


def test_a_database_that_is_not_postgresql_is_w001():
    messages = checks.check_database()
    if connection.vendor == "postgresql":
        assert messages == []
    else:
        assert ids(messages) == ["jobqueue.W001"]
        assert "fine for development" in messages[0].msg


def test_plain_check_shows_w001_and_w002_without_database(tmp_path):
    """A plain ``manage.py check`` (no --database) warns about SQLite without IMMEDIATE, as the
    README says (before: the checks were tagged ``database`` and only ``check --database`` or
    ``migrate`` ran them)."""
    (tmp_path / "sqlite_settings.py").write_text(
        "INSTALLED_APPS = ['django.contrib.contenttypes', 'django.contrib.auth', 'jobqueue']\n"
        "DATABASES = {'default': {'ENGINE': 'django.db.backends.sqlite3',"
        f" 'NAME': {str(tmp_path / 'x.sqlite3')!r}}}}}\n"
        "SECRET_KEY = 'w001'\nUSE_TZ = True\n"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "sqlite_settings"}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(ROOT)])
    done = subprocess.run(
        [sys.executable, "-m", "django", "check"], env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "jobqueue.W001" in done.stderr and "jobqueue.W002" in done.stderr, done.stderr


# -- E002 / E003: TASKS --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ({"QUEUES": "default"}, "must be a list of queue names"),
        ({"QUEUES": ["default", "no spaces"]}, "queue name must match"),
        ({"OPTIONS": {"retries": 3}}, "unknown keys: retries"),
        ({"OPTIONS": {"max_attempts": 0}}, "max_attempts"),
        ({"OPTIONS": {"timeout_s": "soon"}}, "timeout_s"),
        ({"OPTIONS": {"backoff": {"policy": "never"}}}, "policy"),
        ({"OPTIONS": {"database": "elsewhere"}}, "not in DATABASES"),
        ({"OPTIONS": []}, "must be a dict"),
    ],
)
def test_an_invalid_tasks_entry_is_e002(entry, says):
    pytest.importorskip("django.tasks")
    with override_settings(TASKS={"default": {"BACKEND": BACKEND, **entry}}):
        [message] = checks.check_tasks_setting()
        assert ids([message]) == ["jobqueue.E002"]
        assert says in message.msg and "TASKS['default']" in message.msg
        with pytest.raises(SystemCheckError, match=r"jobqueue\.E002"):
            call_command("check", databases=["default"])


def test_a_valid_tasks_entry_is_silent():
    pytest.importorskip("django.tasks")
    good = {
        "default": {
            "BACKEND": BACKEND,
            "QUEUES": ["default", "emails"],
            "OPTIONS": {
                "database": "default",
                "max_attempts": 3,
                "timeout_s": 60,
                "backoff": {"policy": "equal", "base_seconds": 2},
            },
        },
        "other": {"BACKEND": "django.tasks.backends.immediate.ImmediateBackend"},
    }
    with override_settings(TASKS=good):
        assert checks.check_tasks_setting() == []


def test_the_backend_on_a_django_without_tasks_is_e003(monkeypatch):
    # What Django 5.2 looks like to the check: jobqueue.backends and the modules of the
    # jobqueue.tasks package behind it cannot be imported.
    for name in ("backends", "tasks.backend", "tasks.options", "tasks.results", "tasks.runner"):
        monkeypatch.setitem(sys.modules, f"jobqueue.{name}", None)
    with override_settings(TASKS={"default": {"BACKEND": BACKEND}}):
        [message] = checks.check_tasks_setting()
        assert ids([message]) == ["jobqueue.E003"]
        assert "Django 6.0" in message.msg
    with override_settings(
        TASKS={"default": {"BACKEND": "django.tasks.backends.immediate.ImmediateBackend"}}
    ):
        assert checks.check_tasks_setting() == []


def test_the_tasks_package_is_discovered_on_a_django_without_tasks(monkeypatch):
    # ready() imports every installed app's "tasks" module, and jobqueue's own is the package
    # jobqueue.tasks: on Django 5.2 (no django.tasks) that import must succeed, else the app
    # cannot load; only the backend's modules fail (the check then reports E003, see above).
    monkeypatch.setitem(sys.modules, "django.tasks", None)
    for name in [n for n in sys.modules if n.startswith(("jobqueue.tasks", "jobqueue.backends"))]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(jobqueue, "tasks", None, raising=False)  # restored with the modules
    autodiscover_modules("tasks")
    assert "jobqueue.tasks" in sys.modules
    with pytest.raises(ImportError):
        importlib.import_module("jobqueue.backends")


# -- E004: job types named in settings -----------------------------------------------------


@override_settings(JOBQUEUE={})  # the default: no unregistered type is allowed
def test_a_job_type_named_in_settings_that_nothing_defines_is_e004(monkeypatch):
    named = [
        ("JOBQUEUE['CRON']['nightly']", "tests.testapp.jobs.add"),
        ("JOBQUEUE['CRON']['typo']", "tests.testapp.jobs.no_such_job"),
        ("JOBQUEUE['CRON']['missing']", "no_such_module.job"),
    ]
    if "django.tasks" in sys.modules:
        named.append(("JOBQUEUE['CRON']['task']", "tests.testapp.tasks.add"))
    monkeypatch.setattr(checks, "job_types_named_in_settings", lambda: named)
    messages = checks.check_job_types()
    assert ids(messages) == ["jobqueue.E004", "jobqueue.E004"]
    assert "tests.testapp.jobs.no_such_job" in messages[0].msg
    assert "'typo'" in messages[0].msg
    assert "no_such_module.job" in messages[1].msg


@override_settings(
    JOBQUEUE={
        "RATE_LIMITS": {"type": {"tests.testapp.jobs.noop": "5/s", "shop.jobs.nope": "1/s"}},
        "CONCURRENCY_LIMITS": {"type:shop.jobs.also_nope": 3, "acct:42": 1},
    }
)
def test_a_mistyped_type_in_rate_or_concurrency_limits_is_e004_naming_the_setting():
    """A limit on a type nothing defines would limit nothing, silently (issue 18)."""
    messages = checks.check_job_types()
    assert ids(messages) == ["jobqueue.E004", "jobqueue.E004"]
    assert "JOBQUEUE['RATE_LIMITS']['type']['shop.jobs.nope']" in messages[0].msg
    assert "JOBQUEUE['CONCURRENCY_LIMITS']['type:shop.jobs.also_nope']" in messages[1].msg


def test_job_types_check_is_silent_when_all_resolve():
    assert checks.check_job_types() == []


# -- discovery -----------------------------------------------------------------------------


def test_discovery_defaults_to_jobs_and_tasks():
    assert build_settings({}).discover_modules == ("jobs", "tasks")
    assert "tests.testapp.jobs" in sys.modules
    assert "tests.testapp.tasks" in sys.modules


def test_discovery_imports_the_configured_modules(monkeypatch):
    monkeypatch.delitem(sys.modules, "tests.testapp.discovery_probe", raising=False)
    config = apps.get_app_config("jobqueue")
    with override_settings(JOBQUEUE={"DISCOVER_MODULES": []}):
        config.ready()
        assert "tests.testapp.discovery_probe" not in sys.modules
    with override_settings(JOBQUEUE={"DISCOVER_MODULES": ["discovery_probe"]}):
        config.ready()
        assert "tests.testapp.discovery_probe" in sys.modules


def test_an_invalid_setting_does_not_stop_the_app_loading():
    # ready() falls back to the default modules so that `check` can report E001.
    with override_settings(JOBQUEUE={"DISCOVER_MODULES": "jobs"}):
        with pytest.raises(JobQueueConfigurationError):
            build_settings({"DISCOVER_MODULES": "jobs"})
        apps.get_app_config("jobqueue").ready()


# -- E006: TASKS names the backend but the app is not installed ---------------------------

SETTINGS_WITHOUT_THE_APP = """
INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth", "shop"]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
SECRET_KEY = "e006"
USE_TZ = True
TASKS = {"default": {"BACKEND": "jobqueue.backends.JobQueueBackend"}}
"""


def test_the_backend_without_the_app_in_installed_apps_is_e006(tmp_path):
    pytest.importorskip("django.tasks")
    # A project of its own (a settings module that never installs jobqueue): no jobqueue check
    # is registered there, as in a real one, so the backend itself must say it.
    (tmp_path / "no_app_settings.py").write_text(SETTINGS_WITHOUT_THE_APP)
    # The project's own app declares a task where Django's set-up imports it (its models): Django
    # checks task backends only once something has imported django.tasks.
    (tmp_path / "shop").mkdir()
    (tmp_path / "shop" / "__init__.py").write_text("")
    (tmp_path / "shop" / "models.py").write_text(
        "from django.tasks import task\n\n\n@task\ndef send_receipt(order_id):\n    pass\n"
    )
    env = dict(os.environ)
    env["DJANGO_SETTINGS_MODULE"] = "no_app_settings"
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), str(ROOT)])
    done = subprocess.run(
        [sys.executable, "-m", "django", "check"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    assert "jobqueue.E006" in done.stderr
    assert "TASKS['default']" in done.stderr
    assert 'HINT: Add "jobqueue" to INSTALLED_APPS' in done.stderr


def test_the_backend_with_the_app_installed_is_not_e006():
    pytest.importorskip("django.tasks")
    from django.tasks import task_backends

    assert task_backends["default"].check() == []
