"""The claim as a server-side function (``jobqueue/store/postgres/routines.py``).

``migrate`` installs it (the test database was migrated so); a worker calls it by the name of its
own version's text, and sends the statement when that function is missing.
"""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from jobqueue.models import Job
from jobqueue.settings.rates import parse_rate_limits
from jobqueue.states import JobState
from jobqueue.store import get_store
from jobqueue.store.postgres import routines
from jobqueue.store.shared import claim_params as rate_params
from tests.conftest import requires_postgres
from tests.factories import claim_params, job_kwargs, make_job

pytestmark = [requires_postgres(), pytest.mark.django_db]


def _exists(name: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regproc(%s) IS NOT NULL", [name])
        return cursor.fetchone()[0]


@pytest.mark.parametrize("statement", ["claim", "claim~rates"])
def test_migrate_installs_the_claim_function_and_the_claim_calls_it(statement):
    name, text = routines.function_text(statement)
    assert _exists(name)
    assert "plan_cache_mode = force_generic_plan" in text and "jit = off" in text
    call = routines.claim_call("default", statement)
    assert call is not None and call.startswith(f"SELECT * FROM {name}(%(queues)s::text[], ")
    job = make_job(JobState.READY, queue="fn")
    [claimed] = get_store().claim(["fn"], "w1", 5, 30.0)
    assert claimed.id == job.id
    assert Job.objects.get(id=job.id).state == JobState.LEASED


def test_a_version_without_its_function_sends_the_statement():
    """A process whose text's function is not installed (another version migrated, or a role
    that may not create functions) still claims: the statement goes as it is."""
    name, _ = routines.function_text("claim~rates")
    with connection.cursor() as cursor:
        cursor.execute(f"DROP FUNCTION {name}")  # rolled back with the test
    routines._known.clear()
    assert routines.claim_call("default", "claim~rates") is None
    job = make_job(JobState.READY, queue="fn")
    [claimed] = get_store().claim(["fn"], "w1", 5, 30.0)
    assert claimed.id == job.id
    routines._known.clear()


def test_the_function_name_follows_its_text():
    """Two versions of the claim never share a name, so a rolling deploy calls its own."""
    plain, _ = routines.function_text("claim~rates")
    limited, _ = routines.function_text("claim")
    assert plain != limited
    assert plain.startswith("jobqueue_claim_") and len(plain) == len("jobqueue_claim_") + 12


def test_a_parameter_without_a_type_is_refused(monkeypatch):
    monkeypatch.delitem(routines.PARAM_TYPES, "max_jobs")
    routines.function_text.cache_clear()
    try:
        with pytest.raises(KeyError, match="max_jobs"):
            routines.function_text("claim~rates")
    finally:
        routines.function_text.cache_clear()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("statement", ["claim", "claim~rates"])
def test_a_session_begun_on_an_empty_table_never_scans_it_whole(statement):
    # The function's one plan is made at a session's first claim, on the tables' sizes then. A
    # drain's workers start on an empty queue: their claims must not go on scanning the whole
    # jobs table once it fills (the rate limits' part joined back to jobqueue_job and did, at
    # every claim, until the next ANALYZE). Counted by the server, for this transaction.
    call = routines.claim_call("default", statement)
    assert call is not None
    params = claim_params(["empty"], max_jobs=10)
    if statement == "claim":
        params.update(rate_params(parse_rate_limits({"type": {"tests.testapp.jobs.add": "1/s"}})))
    with connection.cursor() as cursor:
        cursor.execute(call, params)  # the session's first claim: the plan, on an empty table
        cursor.fetchall()
    Job.objects.bulk_create(
        [
            Job(**job_kwargs(JobState.READY, queue="empty", tenant_id=f"t{n % 50}"))
            for n in range(3000)
        ]
    )
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(call, params)
        assert len(cursor.fetchall()) >= 10
        cursor.execute(
            "SELECT coalesce(sum(seq_scan), 0) FROM pg_stat_xact_user_tables"
            " WHERE relname IN ('jobqueue_job', 'jobqueue_lane')"
        )
        assert cursor.fetchone()[0] == 0


@pytest.mark.django_db(transaction=True)
def test_a_lane_with_none_of_the_limited_types_is_not_read_whole_for_them():
    # With a rate limit declared, each lane is also probed for the limited types' jobs. A probe
    # by the lane, filtered by type, read the lane's whole backlog in every claim whenever the
    # lane held none of them (the one plan, made for any type, chose it when one type fills the
    # table): 3,000 rows a claim here. Per type, by its index, it reads none.
    call = routines.claim_call("default", "claim")
    assert call is not None
    params = claim_params(["backlog"], max_jobs=10)
    params.update(rate_params(parse_rate_limits({"type": {"tests.testapp.jobs.add": "1/s"}})))
    Job.objects.bulk_create(
        [Job(**job_kwargs(JobState.READY, queue="backlog")) for _ in range(3000)]
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE jobqueue_job")
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(call, params)
        assert len([row for row in cursor.fetchall() if row[0] is not None]) == 10
        cursor.execute(
            "SELECT coalesce(sum(idx_tup_fetch), 0) FROM pg_stat_xact_user_tables"
            " WHERE relname = 'jobqueue_job'"
        )
        assert cursor.fetchone()[0] < 100


def test_only_the_claimable_states_sort_between_the_ends_of_the_limited_probes_range():
    # claim.sql's probe of the limited types and its index name the claimable states as the
    # range 'ready'..'scheduled' (so that only that index matches the probe): no other state
    # may sort inside it.
    inside = {s for s in JobState.values if JobState.READY <= s <= JobState.SCHEDULED}
    assert inside == {JobState.READY, JobState.SCHEDULED}
    with connection.cursor() as cursor:  # and by the database's collation
        cursor.execute(
            "SELECT array_agg(s) FROM unnest(%s::text[]) AS s"
            " WHERE s >= 'ready' AND s <= 'scheduled'",
            [list(JobState.values)],
        )
        assert sorted(cursor.fetchone()[0]) == ["ready", "scheduled"]
