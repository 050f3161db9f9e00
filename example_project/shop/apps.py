"""App config for the shop."""

from django.apps import AppConfig


class ShopConfig(AppConfig):
    """The shop app; its ``jobs`` module is found by jobqueue's autodiscovery."""

    name = "example_project.shop"
    label = "shop"
    verbose_name = "Shop"
    default_auto_field = "django.db.models.BigAutoField"
