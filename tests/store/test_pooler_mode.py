"""Pooler mode without a pooler: the setting, the checks, which alias listens, no prepared
statements on a pooled alias, and that direct connections are not taken for a pooler.

The real PgBouncer runs are tests/process/test_pooler.py (field case 27).
"""

from __future__ import annotations

import copy
import threading

import pytest
from django.conf import settings
from django.db import connection, connections
from django.test import override_settings

import jobqueue
from jobqueue import checks
from jobqueue.errors import JobQueueConfigurationError
from jobqueue.flows import results
from jobqueue.models import Job
from jobqueue.settings.conf import build_settings
from jobqueue.store.pooler import listen_alias, refuse_unmarked_pooler, shared_backend_pid
from jobqueue.worker.loop import Worker
from tests.conftest import requires_postgres, wait_for
from tests.factories import run_one


def _pooled(alias: str = "default", listen: object = "direct") -> dict:
    return {**settings.JOBQUEUE, "POOLED_DATABASES": {alias: {"LISTEN_DATABASE": listen}}}


def test_the_setting_parses_to_alias_and_listen_alias():
    parsed = build_settings(
        {"POOLED_DATABASES": {"default": {"LISTEN_DATABASE": "direct"}, "web": {}}}
    ).pooled_databases
    assert dict(parsed) == {"default": "direct", "web": None}
    assert dict(build_settings({}).pooled_databases) == {}


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (["default"], "must be a dict"),
        ({"": {}}, "non-empty strings"),
        ({"default": "direct"}, "['default'] must be a dict"),
        ({"default": {"LISTEN": "direct"}}, "unknown keys: LISTEN"),
        ({"default": {"LISTEN_DATABASE": 5}}, "must be a database alias or None"),
        ({"default": {"LISTEN_DATABASE": "default"}}, "names the pooled alias itself"),
    ],
)
def test_a_bad_setting_is_an_error_naming_the_key(value, words):
    with pytest.raises(JobQueueConfigurationError) as err:
        build_settings({"POOLED_DATABASES": value})
    assert "POOLED_DATABASES" in str(err.value)
    assert words in str(err.value)


def test_which_alias_listens():
    assert listen_alias("default") == "default"
    with override_settings(JOBQUEUE=_pooled()):
        assert listen_alias("default") == "direct"
        assert listen_alias("sqlite") == "sqlite"
    with override_settings(JOBQUEUE=_pooled(listen=None)):
        assert listen_alias("default") is None


@requires_postgres()
@pytest.mark.django_db
def test_a_pooled_alias_without_a_listen_alias_polls():
    with override_settings(JOBQUEUE=_pooled(listen=None)):
        worker = Worker(queues=["q"], install_signal_handlers=False)
    assert worker.listen_on is None
    with override_settings(JOBQUEUE=_pooled(listen="other")):
        worker = Worker(queues=["q"], install_signal_handlers=False)
    assert (worker.listen_on, worker.listen_notify) == ("other", True)


@requires_postgres()
@pytest.mark.django_db(transaction=True)
def test_wait_never_listens_through_the_pooler():
    """jobqueue.wait on a pooled alias without a LISTEN_DATABASE polls (no listener at all),
    and still returns once the job finishes; before, it LISTENed through the pooler, was never
    notified, and every wait ran to its timeout (found in a release-candidate trial). Without a
    real pooler here the NOTIFY would reach a wrong LISTEN too, so the listener's absence is the
    assertion that fails before the fix; the real-pooler run is test_process_pooler.py."""
    with override_settings(JOBQUEUE=_pooled(listen=None)):
        assert results._listener("default") is None
        job_id = jobqueue.enqueue("q", "tests.testapp.jobs.noop", {})

        def finish_once_watched() -> None:
            # Finish only once the waiter has marked the job, so the wait really waits.
            wait_for(lambda: Job.objects.filter(id=job_id, watched=True).exists(), timeout=60)
            run_one("q")

        finisher = threading.Thread(target=finish_once_watched)
        finisher.start()
        try:
            assert jobqueue.wait(job_id, timeout=60).state == "succeeded"
        finally:
            finisher.join()
        connections.close_all()


def _check_ids(databases: dict, jobqueue: dict) -> list[tuple[str, str]]:
    with override_settings(DATABASES=databases, JOBQUEUE=jobqueue):
        messages = checks.check_pooled_databases()
    assert all(m.hint for m in messages)
    return [(m.id, m.msg) for m in messages]


PG = {"ENGINE": "django.db.backends.postgresql", "NAME": "shop", "HOST": "h"}


def test_checks_report_what_the_settings_show():
    good = {
        "default": {**PG, "PORT": 6432, "DISABLE_SERVER_SIDE_CURSORS": True},
        "direct": {**PG, "PORT": 5432},
    }
    assert _check_ids(good, _pooled()) == []
    # Not marked, on PgBouncer's port.
    assert [i for i, _ in _check_ids(good, {})] == ["jobqueue.W022"]
    # A pooled alias that is not in DATABASES; a listen alias that is not.
    assert [i for i, _ in _check_ids(good, _pooled(alias="nope"))] == [
        "jobqueue.E020",
        "jobqueue.W022",
    ]
    assert [i for i, _ in _check_ids(good, _pooled(listen="nope"))] == ["jobqueue.E020"]
    # A backend built on Django's PostgreSQL one (as PostGIS is) is PostgreSQL, whatever its
    # ENGINE is called (its vendor decides); SQLite is not.
    custom = copy.deepcopy(good)
    custom["default"]["ENGINE"] = "tests.testapp.customdb"
    assert _check_ids(custom, _pooled()) == []
    lite = {**good, "direct": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
    assert [i for i, _ in _check_ids(lite, _pooled())] == ["jobqueue.E020"]
    # prepare_threshold in OPTIONS, server-side cursors kept.
    loose = copy.deepcopy(good)
    loose["default"]["OPTIONS"] = {"prepare_threshold": 5, "server_side_binding": True}
    del loose["default"]["DISABLE_SERVER_SIDE_CURSORS"]
    found = _check_ids(loose, _pooled())
    assert [i for i, _ in found] == ["jobqueue.W020", "jobqueue.W021"]
    assert "prepare_threshold" in found[0][1]


@requires_postgres()
@pytest.mark.django_db(transaction=True)
def test_no_prepared_statements_on_a_pooled_alias_whatever_the_options_say():
    options = connection.settings_dict.setdefault("OPTIONS", {})
    options["prepare_threshold"] = 0  # prepare every statement
    try:
        connection.close()
        connection.ensure_connection()
        assert connection.connection.prepare_threshold == 0
        with override_settings(JOBQUEUE=_pooled()):
            connection.close()
            connection.ensure_connection()
            assert connection.connection.prepare_threshold is None
            with connection.cursor() as cursor:
                for _ in range(3):
                    cursor.execute("SELECT count(*) FROM jobqueue_job WHERE queue = %s", ["q"])
                cursor.execute("SELECT count(*) FROM pg_prepared_statements")
                assert cursor.fetchone() == (0,)
    finally:
        del options["prepare_threshold"]
        connection.close()


@requires_postgres()
@pytest.mark.django_db(transaction=True)
def test_direct_connections_are_not_taken_for_a_pooler():
    assert shared_backend_pid("default") is None
    refuse_unmarked_pooler("default")  # no error
    assert checks.check_transaction_pooler(databases=["default"]) == []
    assert connections["default"].vendor == "postgresql"
