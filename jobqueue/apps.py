"""App config: the app label, checks, and discovery of ``jobs`` and ``tasks`` modules."""

from __future__ import annotations

import sys
from types import ModuleType

from django.apps import AppConfig
from django.db.models.signals import post_migrate
from django.utils.module_loading import autodiscover_modules

from jobqueue import registry
from jobqueue.errors import JobQueueConfigurationError
from jobqueue.settings.conf import DEFAULT_DISCOVER_MODULES, get_settings
from jobqueue.worker.stopping import hold_stops_during_start_up

try:
    from jobqueue.tasks.backend import task_job_type
except ImportError:  # Django 5.2 has no django.tasks: no job type can be a task
    task_job_type = None  # type: ignore[assignment]


class JobQueueConfig(AppConfig):
    """jobqueue's AppConfig. ``ready`` imports every installed app's job and task modules."""

    name = "jobqueue"
    label = "jobqueue"
    verbose_name = "Job queue"
    default_auto_field = "django.db.models.BigAutoField"

    def __init__(self, app_name: str, app_module: ModuleType | None) -> None:
        super().__init__(app_name, app_module)
        # The earliest moment jobqueue's code runs in `manage.py runworkers`: Django is only
        # starting to build the app registry, and a SIGTERM now must not kill the process.
        # (`python -m jobqueue runworkers` held it already, before importing Django.)
        hold_stops_during_start_up(sys.argv)

    def ready(self) -> None:
        """Register the system checks and import the discovered modules of installed apps.

        The modules are ``JOBQUEUE["DISCOVER_MODULES"]`` (default ``jobs`` and ``tasks``), so
        ``runworkers`` knows every ``@job`` and ``@task`` without further settings. An invalid
        ``JOBQUEUE`` setting falls back to the default here, so that ``manage.py check`` can
        report it (jobqueue.E001) instead of the app failing to load.
        """
        # In ready(), not at module level: Django imports this module while it loads the apps,
        # before models may be imported, and the checks reach the models (through the store).
        from jobqueue import checks  # noqa: F401  (registers the system checks)

        # The same reason: the store reaches the models. migrate (re)creates the claim's
        # server-side function on each PostgreSQL database it migrates (store/postgres/routines.py).
        from jobqueue.store.postgres.routines import install_after_migrate

        post_migrate.connect(install_after_migrate, sender=self, dispatch_uid="jobqueue.claim_fn")
        if task_job_type is not None:
            # A type nothing registers may be a django.tasks task (enqueued with
            # .using(backend=...)): the worker resolves it through the backend.
            registry.add_resolver(task_job_type)

        try:
            modules = get_settings().discover_modules
        except JobQueueConfigurationError:
            modules = DEFAULT_DISCOVER_MODULES
        autodiscover_modules(*modules)
