from . import cron  # noqa: F401
