"""Settings for the example shop.

Everything that differs between a laptop and a server comes from the environment (or a ``.env``
file next to ``manage.py``), read with django-environ:

- ``DATABASE_URL``: defaults to SQLite at ``example_project/db.sqlite3``; point it at PostgreSQL
  (``postgres://user@host:5432/name``) for the queue's real home.
- ``DJANGO_SECRET_KEY``, ``DJANGO_DEBUG``, ``DJANGO_ALLOWED_HOSTS``.
- ``EMAIL_FILE_PATH``: the folder receipts are written to, one ``.eml`` file per message.
- ``SHOP_LOG_DIR``: where ``rundemo`` writes worker logs.
- ``SHOP_PARTNER_SEED`` and ``SHOP_PARTNER_*_RATE``: the flaky payment partner stand-in.
"""

from __future__ import annotations

from pathlib import Path

import django
import environ

#: The ``example_project`` package directory.
BASE_DIR = Path(__file__).resolve().parent
#: The repository root, where ``manage.py`` lives.
PROJECT_ROOT = BASE_DIR.parent

env = environ.Env()
if (PROJECT_ROOT / ".env").is_file():
    environ.Env.read_env(PROJECT_ROOT / ".env")

SECRET_KEY = env.str(
    "DJANGO_SECRET_KEY", default="django-insecure-example-shop-only-for-local-development"
)
DEBUG = env.bool("DJANGO_DEBUG", default=True)
ALLOWED_HOSTS = ["*"] if DEBUG else env.list("DJANGO_ALLOWED_HOSTS", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "jobqueue",
    "example_project.shop",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "example_project.urls"
WSGI_APPLICATION = "example_project.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": env.db("DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}"),
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Several worker processes write at once. IMMEDIATE takes the write lock when a transaction
    # starts, so two readers never deadlock upgrading to writers (SQLITE_BUSY at once, no wait);
    # the timeout lets a writer wait for the lock instead of failing.
    DATABASES["default"]["OPTIONS"] = {
        **DATABASES["default"].get("OPTIONS", {}),
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        # WAL lets readers (the admin, rundemo's progress) run while a worker writes.
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"

# Receipts go to files, so the demo needs no mail server and its output can be counted and read:
# Django's file-based backend, changed to write one standard ``.eml`` file per message.
# (Django 6.1 configures mail with MAILERS; EMAIL_BACKEND and EMAIL_FILE_PATH are deprecated.)
SHOP_EMAIL_DIR = Path(env.str("EMAIL_FILE_PATH", default=str(BASE_DIR / "sent_emails")))
MAILERS = {
    "default": {
        "BACKEND": "example_project.shop.mail.EmlFileBackend",
        "OPTIONS": {"file_path": str(SHOP_EMAIL_DIR)},
    },
}
if django.VERSION < (6, 1):
    # Before MAILERS (Django 5.2 LTS): the same backend, configured the old way.
    del MAILERS
    EMAIL_BACKEND = "example_project.shop.mail.EmlFileBackend"
    EMAIL_FILE_PATH = str(SHOP_EMAIL_DIR)
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="Corner Roastery <orders@example.com>")

JOBQUEUE = {
    # The demo wants to show retries finishing in seconds, so poll often when NOTIFY is absent.
    "POLL_INTERVAL_SECONDS": 0.2,
}

#: The shop's name on receipts and card statements.
SHOP_NAME = env.str("SHOP_NAME", default="Corner Roastery")

#: The stand-in payment partner (see ``shop/partner.py``). A seed makes its coin flips repeatable.
SHOP_PARTNER = {
    "SEED": env.int("SHOP_PARTNER_SEED", default=None),
    "UNAVAILABLE_RATE": env.float("SHOP_PARTNER_UNAVAILABLE_RATE", default=0.25),
    "LOST_RESPONSE_RATE": env.float("SHOP_PARTNER_LOST_RESPONSE_RATE", default=0.05),
    "BUSY_RATE": env.float("SHOP_PARTNER_BUSY_RATE", default=0.10),
    "BUSY_RETRY_AFTER_SECONDS": env.float("SHOP_PARTNER_BUSY_RETRY_AFTER_SECONDS", default=0.5),
    "LATENCY_SECONDS": env.float("SHOP_PARTNER_LATENCY_SECONDS", default=0.02),
}

#: Where ``rundemo`` writes one log file per worker process.
SHOP_LOG_DIR = Path(env.str("SHOP_LOG_DIR", default=str(BASE_DIR / "logs")))

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)-7s [%(process)d] %(name)s: %(message)s"},
    },
    "handlers": {
        "stderr": {
            "class": "logging.StreamHandler",
            "stream": "ext://sys.stderr",
            "formatter": "plain",
        },
    },
    "loggers": {
        "jobqueue": {
            "handlers": ["stderr"],
            "level": env.str("JOBQUEUE_LOG_LEVEL", default="INFO"),
            "propagate": False,
        },
        "example_project": {
            "handlers": ["stderr"],
            "level": env.str("SHOP_LOG_LEVEL", default="INFO"),
            "propagate": False,
        },
    },
}
