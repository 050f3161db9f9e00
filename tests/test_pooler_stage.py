"""The pooler stage's own checks (``tests/pooler_stage.py``; ``.ci/test`` runs it there too).

Everywhere: the statement guard tells statements that keep session state from those that do
not. In the pooler stage (``JOBQUEUE_TEST_POOLER=1``): ``default`` really goes through the
stage's PgBouncer in transaction mode, and such a statement fails the test that sends it.
"""

from __future__ import annotations

import os

import pytest
from django.db import connections

from tests.conftest import requires_postgres
from tests.pooler_stage import PORT_ENV, SESSION_STATE, SessionStateError

KEEPS_SESSION_STATE = [
    "SET statement_timeout = 5",
    "set search_path TO x",
    "SET SESSION lock_timeout = 1",
    "RESET ALL",
    "LISTEN jobqueue_ready",
    "PREPARE q AS SELECT 1",
    "DISCARD ALL",
    "SELECT set_config('lock_timeout', '5000', false)",
    "SELECT pg_advisory_lock(1)",
    "SELECT pg_try_advisory_lock_shared(1)",
    "SELECT pg_advisory_unlock(1)",
    "DECLARE c CURSOR WITH HOLD FOR SELECT 1",
]
TRANSACTION_SCOPED = [
    "SET LOCAL statement_timeout = 5",
    "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE",
    "SET CONSTRAINTS ALL DEFERRED",
    "SELECT set_config('lock_timeout', '5000', true), set_config('x.y', '1', true)",
    "SELECT pg_advisory_xact_lock(1)",
    "SELECT pg_notify('jobqueue_ready', 'q')",
    "SELECT id FROM jobqueue_job WHERE queue = %(queue)s -- reset the offset",
]


@pytest.mark.parametrize("sql", KEEPS_SESSION_STATE)
def test_the_guard_refuses_what_keeps_session_state(sql):
    assert SESSION_STATE.search(sql)


@pytest.mark.parametrize("sql", TRANSACTION_SCOPED)
def test_the_guard_lets_transaction_scoped_statements_through(sql):
    assert not SESSION_STATE.search(sql)


pooler_only = pytest.mark.skipif(
    not os.environ.get("JOBQUEUE_TEST_POOLER"), reason="the pooler stage only"
)


@pooler_only
@requires_postgres()
@pytest.mark.django_db(databases=["default", "direct"])
def test_in_the_pooler_stage_default_goes_through_pgbouncer_and_session_state_fails():
    settings = connections["default"].settings_dict
    assert str(settings["PORT"]) == os.environ[PORT_ENV]
    assert connections["direct"].settings_dict["NAME"] == settings["NAME"]
    with connections["default"].cursor() as cursor:
        cursor.execute("SHOW application_name")  # a real server behind it answers
        with pytest.raises(SessionStateError, match="keeps session state"):
            cursor.execute("SET statement_timeout = 5")
