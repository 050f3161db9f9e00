"""Settings for jobqueue's own tests: PostgreSQL by DATABASE_URL, plus an SQLite alias.

``default`` is the queue under test (PostgreSQL unless DATABASE_URL says otherwise); ``sqlite``
lets the generic store's contract tests run in the same session.
"""

import importlib.util

import django
import django.core.exceptions
import environ

from tests import pooler_stage
from tests.testapp.startup_pause import pause_if_asked

# A test may stop a worker process here, before any app config exists (test_command.py).
pause_if_asked("settings")

env = environ.Env()

DATABASES = {
    "default": env.db("DATABASE_URL", default="postgres://postgres@127.0.0.1:5432/jobqueue"),
    "sqlite": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": env("JOBQUEUE_TEST_SQLITE", default="jobqueue-tests.sqlite3"),
        "OPTIONS": {"transaction_mode": "IMMEDIATE", "timeout": 30},
    },
}
# A second queue database for the outbox tests (tests/client/test_outbox.py): the same server, its
# own
# database (test_<name>_outbox_queue under pytest); subprocesses: JOBQUEUE_OUTBOX_QUEUE_URL.
if env("JOBQUEUE_OUTBOX_QUEUE_URL", default=""):
    DATABASES["outbox_queue"] = env.db("JOBQUEUE_OUTBOX_QUEUE_URL")
else:
    DATABASES["outbox_queue"] = {
        **DATABASES["default"],
        "NAME": (
            f"{DATABASES['default']['NAME']}_outbox_queue"
            if DATABASES["default"]["ENGINE"] != "django.db.backends.sqlite3"
            else env("JOBQUEUE_TEST_SQLITE_OUTBOX", default="jobqueue-tests-outbox.sqlite3")
        ),
    }
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {"transaction_mode": "IMMEDIATE", "timeout": 30}
    )

# Queue-database tests (tests/client/test_queue_databases.py): a second queue database, "queues2",
# beside the default (a second database on the same PostgreSQL server, or a second SQLite file).
# A worker subprocess is told the test database's name by JOBQUEUE_QUEUES2_URL.
if env("JOBQUEUE_QUEUES2_URL", default=""):
    DATABASES["queues2"] = env.db("JOBQUEUE_QUEUES2_URL")
elif DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["queues2"] = {**DATABASES["sqlite"], "NAME": "jobqueue-tests-queues2.sqlite3"}
else:
    DATABASES["queues2"] = {
        **DATABASES["default"],
        "NAME": f"{DATABASES['default']['NAME']}_queues2",
    }

# Two runs of the suite on one PostgreSQL server (two checkouts side by side, .ci/test in each):
# JOBQUEUE_TEST_RUN (.ci/test sets a fresh one) goes into the names of the test databases, which
# otherwise both runs would call test_<name>_gw0 and drop under each other.
if env("JOBQUEUE_TEST_RUN", default=""):
    for alias in ("default", "outbox_queue", "queues2"):
        given = DATABASES[alias]
        if given["ENGINE"] != "django.db.backends.sqlite3" and not given.get("TEST"):
            given["TEST"] = {"NAME": f"test_{given['NAME']}_{env('JOBQUEUE_TEST_RUN')}"}

# The migration router test (tests/client/test_queue_databases.py) adds SQLite files
# "alias=path,...".
for extra in filter(None, env("JOBQUEUE_TEST_EXTRA_SQLITE", default="").split(",")):
    extra_alias, _, extra_path = extra.partition("=")
    DATABASES[extra_alias] = {"ENGINE": "django.db.backends.sqlite3", "NAME": extra_path}
DATABASE_ROUTERS = env.list("JOBQUEUE_TEST_ROUTERS", default=[])

# Pooler-mode tests (tests/process/test_pooler.py): DATABASE_URL goes through PgBouncer,
# JOBQUEUE_DIRECT_URL reaches the same database directly (the "direct" alias, for LISTEN).
if env("JOBQUEUE_DIRECT_URL", default=""):
    DATABASES["direct"] = env.db("JOBQUEUE_DIRECT_URL")
# A worker process's connections, told apart in pg_stat_activity (the connection budget test).
if env("JOBQUEUE_TEST_APPLICATION_NAME", default=""):
    DATABASES["default"].setdefault("OPTIONS", {})["application_name"] = env(
        "JOBQUEUE_TEST_APPLICATION_NAME"
    )

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "jobqueue",
    "tests.testapp",
]
SECRET_KEY = "jobqueue-tests"
USE_TZ = True
TIME_ZONE = "UTC"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# Many tests enqueue type names nothing registers ("shop.jobs.charge") to test the queue
# itself; tests of the default (refused) override JOBQUEUE without this key.
JOBQUEUE = {"ENQUEUE_UNREGISTERED": True, **env.json("JOBQUEUE_SETTINGS", default={})}
# The pooler stage of .ci/test (issue 16): default through a PgBouncer in transaction mode that
# the session starts, pooled, LISTENing on "direct"; session state on it fails the statement.
if env.bool("JOBQUEUE_TEST_POOLER", default=False):
    if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
        raise django.core.exceptions.ImproperlyConfigured("JOBQUEUE_TEST_POOLER needs PostgreSQL")
    pooler_stage.configure(DATABASES, JOBQUEUE)
if "default" in JOBQUEUE.get("POOLED_DATABASES", {}):
    # As docs/deployment.md says for a pooled alias (Django's own advice for PgBouncer).
    DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = True
if importlib.util.find_spec("django.tasks") is not None:  # Django 6.0+
    # The tasks of tests/testapp/tasks.py run on jobqueue; "immediate" is Django's own backend,
    # for a task declared elsewhere and moved onto jobqueue with .using(backend="default").
    TASKS = {
        "default": {
            "BACKEND": "jobqueue.backends.JobQueueBackend",
            "QUEUES": ["default", "tasks", "emails"],
        },
        "immediate": {"BACKEND": "django.tasks.backends.immediate.ImmediateBackend"},
    }
# Worker subprocesses send real mail in the documented example; keep it in memory.
if django.VERSION >= (6, 1):
    MAILERS = {"default": {"BACKEND": "django.core.mail.backends.locmem.EmailBackend"}}
else:
    EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"stderr": {"class": "logging.StreamHandler"}},
    "loggers": {
        "jobqueue": {"handlers": ["stderr"], "level": env("JOBQUEUE_LOG_LEVEL", default="INFO")},
        # Django's tasks framework logs each task's start and end (with the traceback of a
        # failure) on this logger; the process tests read it from the worker's output.
        "django.tasks": {"handlers": ["stderr"], "level": "INFO"},
    },
}
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]
ROOT_URLCONF = "tests.urls"
STATIC_URL = "static/"

if env.bool("JOBQUEUE_TEST_NO_GC", default=False):
    # A worker process as in FIELD-CASES 32: no cycle collector, and a 1 GiB address-space
    # limit, so a leak fails the test (MemoryError) instead of filling the machine.
    import gc
    import resource

    gc.disable()
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

if env.str("JOBQUEUE_TEST_OTEL_SPANS", default=""):
    # A worker process of tests/test_tracing.py: an OpenTelemetry SDK that writes each ended
    # span to this file, one JSON line each, for the test to read.
    from tests.otel import export_spans_to

    export_spans_to(env.str("JOBQUEUE_TEST_OTEL_SPANS"))
