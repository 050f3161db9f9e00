"""The no-op task, declared for each peer (autodiscovered as ``peerapp.tasks``)."""

from django.tasks import task
from procrastinate.contrib.django import app


@task(queue_name="bench")
def noop(i: int = 0) -> None:
    """Do nothing (django-tasks-db)."""


@app.task(queue="bench", name="noop")
def procrastinate_noop(i: int = 0) -> None:
    """Do nothing (Procrastinate)."""
