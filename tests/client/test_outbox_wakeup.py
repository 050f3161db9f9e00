"""The outbox relay wakes on NOTIFY (issue 16): an outbox write notifies ``jobqueue_outbox`` at the
caller's commit, and the relay LISTENs on each source, on a direct connection, polling as well.

The relay here polls once an hour: a job relayed within the hang guard was woken by its NOTIFY.
"""

from __future__ import annotations

import threading

import psycopg
import pytest
from django.db import connection, transaction
from django.test import override_settings

import jobqueue
from jobqueue.maintenance.relay import OutboxRelay
from jobqueue.maintenance.services import ServiceRunner
from jobqueue.models import Job, OutboxEntry
from jobqueue.store.interface import OUTBOX_CHANNEL
from jobqueue.store.notify import listen_connection_params
from tests.conftest import requires_postgres, wait_for

pytestmark = [
    requires_postgres(),
    pytest.mark.django_db(databases=["default", "outbox_queue"], transaction=True),
]

QUEUE_DB = "outbox_queue"
TYPE = "tests.testapp.jobs.record"
HOUR_S = 3600.0


def start_relay(relay: OutboxRelay) -> tuple[threading.Event, threading.Thread]:
    stop = threading.Event()
    thread = ServiceRunner([relay], name="relay", using=QUEUE_DB, stop=stop).thread()
    thread.start()
    # Its first round (at once) starts the listeners; wait until each one LISTENs.
    wait_for(lambda: relay.listeners is not None, timeout=300)
    for listener in relay.listeners or ():
        assert listener.connected.wait(300)
    return stop, thread


def test_a_commit_wakes_a_relay_that_polls_once_an_hour():
    relay = OutboxRelay(using=QUEUE_DB, interval_s=HOUR_S)
    stop, thread = start_relay(relay)
    try:
        assert [listener.alias for listener in relay.listeners or ()] == ["default"]
        with transaction.atomic():
            one = jobqueue.enqueue("emails", TYPE, {"path": "/dev/null"}, using=QUEUE_DB)
        wait_for(lambda: Job.objects.using(QUEUE_DB).filter(id=one).exists(), timeout=300)
        with transaction.atomic():
            many = jobqueue.enqueue_many(
                [
                    {"queue": "emails", "job_type": TYPE, "payload": {"path": "/dev/null", "n": n}}
                    for n in range(3)
                ],
                using=QUEUE_DB,
            )
        wait_for(lambda: Job.objects.using(QUEUE_DB).filter(id__in=many).count() == 3, 300)
        assert not OutboxEntry.objects.using("default").exists()
    finally:
        stop.set()
        thread.join(300)
    # The runner's stop() hook ended the listeners with it.
    assert all(not listener.connected.is_set() for listener in relay.listeners or ())


def test_an_outbox_write_notifies_at_commit_only():
    """A rollback notifies nothing; a commit notifies once, the queue database as payload."""
    with psycopg.connect(**listen_connection_params("default"), autocommit=True) as listener:
        listener.execute(f"LISTEN {OUTBOX_CHANNEL}")
        with pytest.raises(RuntimeError), transaction.atomic():
            jobqueue.enqueue("emails", TYPE, {"path": "/dev/null"}, using=QUEUE_DB)
            raise RuntimeError("the order fails")
        with transaction.atomic():
            jobqueue.enqueue_many(
                [
                    {"queue": "emails", "job_type": TYPE, "payload": {"path": "/dev/null", "n": n}}
                    for n in range(3)
                ],
                using=QUEUE_DB,
            )
        # A probe after both: notifications arrive in commit order, so all are in by then.
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, 'probe')", [OUTBOX_CHANNEL])
        payloads: list[str] = []
        for notify in listener.notifies(timeout=300):
            payloads.append(notify.payload)
            if notify.payload == "probe":
                break
    assert payloads == [QUEUE_DB, "probe"]


def test_the_relay_listens_on_a_pooled_sources_direct_alias_or_polls():
    assert OutboxRelay(using=QUEUE_DB).listen_aliases() == ["default"]
    pooled = {"POOLED_DATABASES": {"default": {"LISTEN_DATABASE": "sqlite"}}}
    with override_settings(JOBQUEUE=pooled):
        assert OutboxRelay(using=QUEUE_DB).listen_aliases() == ["sqlite"]
    with override_settings(JOBQUEUE={"POOLED_DATABASES": {"default": {}}}):
        assert OutboxRelay(using=QUEUE_DB).listen_aliases() == []
    with override_settings(JOBQUEUE={"LISTEN_NOTIFY": False}):
        assert OutboxRelay(using=QUEUE_DB).listen_aliases() == []
