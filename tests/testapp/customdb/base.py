"""The backend's wrapper: Django's PostgreSQL one, under another ENGINE name."""

from django.db.backends.postgresql.base import DatabaseWrapper as PostgresWrapper


class DatabaseWrapper(PostgresWrapper):
    """Nothing changed: what matters is that its ENGINE's name does not say "postgresql"."""
