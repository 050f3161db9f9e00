"""App config: the app label, checks, and discovery of ``jobs`` modules."""

from __future__ import annotations

from django.apps import AppConfig


class JobQueueConfig(AppConfig):
    """jobqueue's AppConfig. ``ready`` imports every installed app's ``jobs`` module."""

    name = "jobqueue"
    label = "jobqueue"
    verbose_name = "Job queue"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """Register the system checks and import every installed app's ``jobs`` module."""
        from django.utils.module_loading import autodiscover_modules

        from . import checks  # noqa: F401  (registers the system checks)

        autodiscover_modules("jobs")
