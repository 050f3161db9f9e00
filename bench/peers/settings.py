"""Django settings for the peer benchmark: django-tasks-db and Procrastinate on one database."""

import environ

env = environ.Env()

DATABASES = {"default": env.db("PEERS_DATABASE_URL")}
INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "django_tasks_db",
    "procrastinate.contrib.django",
    "peerapp",
]
SECRET_KEY = "jobqueue-bench-peers"
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend", "QUEUES": ["bench"]}}
LOGGING = {"version": 1, "disable_existing_loggers": False, "root": {"level": "WARNING"}}
