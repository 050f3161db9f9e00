"""Pause and resume (issue 17), in process, on both stores; the API; the admin.

A pause is a write of queue state (the store); every claim reads it: a paused queue or job type
gives nothing to any claim, other queues and types are still claimed, enqueue keeps working,
and resume makes the jobs claimable again. The real-process half is in test_process_pause.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.admin.models import ADDITION, DELETION, LogEntry
from django.contrib.auth.models import User
from django.db import connection
from django.urls import reverse

import jobqueue
from jobqueue.errors import InvalidJobOption
from jobqueue.models import Job, Pause
from jobqueue.states import JobState
from jobqueue.store import get_store
from jobqueue.store.sqltext import sql
from tests.conftest import requires_postgres
from tests.factories import claim_params, make_job, make_jobs

NOOP = "tests.testapp.jobs.noop"
OTHER = "tests.testapp.jobs.add"


class PauseContract:
    """Needs ``alias``; the store under test is ``get_store(alias)``."""

    alias: str

    @pytest.fixture
    def store(self):
        return get_store(self.alias)

    def make(self, queue: str = "q", job_type: str = NOOP) -> int:
        return make_job(JobState.READY, using=self.alias, queue=queue, type=job_type).id

    def claim_all(self, store: Any, queues: list[str]) -> set[int]:
        return {j.id for j in store.claim(queues, "w1", 100, 30.0)}

    def test_a_paused_queue_gives_nothing_and_other_queues_are_still_claimed(self, store):
        paused_job = self.make("mail")
        other_job = self.make("q")
        paused, created = store.pause("queue", "mail", "alice", "smtp down")
        assert created is True
        assert (paused.kind, paused.name, paused.paused_by, paused.reason) == (
            "queue",
            "mail",
            "alice",
            "smtp down",
        )
        assert self.claim_all(store, ["mail", "q"]) == {other_job}
        assert self.claim_all(store, ["mail"]) == set()
        assert Job.objects.using(self.alias).get(id=paused_job).state == JobState.READY

    def test_resume_makes_the_queue_claimable_again(self, store):
        job_id = self.make("mail")
        store.pause("queue", "mail", "alice")
        assert self.claim_all(store, ["mail"]) == set()
        lifted = store.resume("queue", "mail")
        assert lifted is not None and lifted.paused_by == "alice"
        assert self.claim_all(store, ["mail"]) == {job_id}
        assert store.paused() == []

    def test_a_paused_type_gives_nothing_in_any_queue_and_other_types_are_claimed(self, store):
        a = self.make("q", NOOP)
        b = self.make("r", NOOP)
        other = self.make("q", OTHER)
        store.pause("type", NOOP, "bob")
        assert self.claim_all(store, ["q", "r"]) == {other}
        assert store.resume("type", NOOP) is not None
        assert self.claim_all(store, ["q", "r"]) == {a, b}

    def test_a_queue_and_a_type_of_the_same_name_are_separate_pauses(self, store):
        job_id = self.make("q", "q")
        store.pause("type", "q", "bob")
        assert store.resume("queue", "q") is None
        assert self.claim_all(store, ["q"]) == set()
        store.resume("type", "q")
        assert self.claim_all(store, ["q"]) == {job_id}

    def test_enqueue_keeps_working_while_paused(self, store):
        store.pause("queue", "mail", "alice")
        job_id = jobqueue.enqueue("mail", NOOP, {"n": 1}, using=self.alias)
        row = Job.objects.using(self.alias).get(id=job_id)
        assert row.state == JobState.READY
        assert self.claim_all(store, ["mail"]) == set()

    def test_pausing_twice_keeps_the_first_pause(self, store):
        first, created = store.pause("queue", "mail", "alice", "first")
        again, created_again = store.pause("queue", "mail", "bob", "second")
        assert (created, created_again) == (True, False)
        assert again == first
        assert [(p.name, p.paused_by, p.reason) for p in store.paused()] == [
            ("mail", "alice", "first")
        ]

    def test_resuming_what_is_not_paused_changes_nothing(self, store):
        assert store.resume("queue", "mail") is None
        assert store.resume("type", NOOP) is None

    # -- the public API ----------------------------------------------------------------------

    def test_the_api_pauses_and_resumes_queues_and_types_and_says_what_it_did(self):
        using = self.alias
        assert jobqueue.pause("mail", by="ops", reason="maintenance", using=using) is True
        assert jobqueue.pause("mail", by="other", using=using) is False
        assert jobqueue.pause_type(NOOP, by="ops", using=using) is True
        [queue_pause, type_pause] = jobqueue.paused(using=using)
        assert (queue_pause.kind, queue_pause.name, queue_pause.paused_by) == (
            "queue",
            "mail",
            "ops",
        )
        assert (type_pause.kind, type_pause.name) == ("type", NOOP)
        assert queue_pause.paused_at is not None
        assert jobqueue.resume("mail", using=using) is True
        assert jobqueue.resume("mail", using=using) is False
        assert jobqueue.resume_type(NOOP, using=using) is True
        assert jobqueue.resume_type(NOOP, using=using) is False
        assert jobqueue.paused(using=using) == []

    @pytest.mark.parametrize("bad", ["", "has space", "x" * 101, "semi;colon", None, 3])
    def test_the_api_refuses_a_bad_queue_name_and_writes_nothing(self, bad):
        with pytest.raises(InvalidJobOption, match="queue"):
            jobqueue.pause(bad, using=self.alias)
        with pytest.raises(InvalidJobOption, match="queue"):
            jobqueue.resume(bad, using=self.alias)
        assert not Pause.objects.using(self.alias).exists()

    @pytest.mark.parametrize("bad", ["", "has space", "x" * 201, "nul\x00", None])
    def test_the_api_refuses_a_bad_type_name_and_writes_nothing(self, bad):
        with pytest.raises(InvalidJobOption, match="job_type"):
            jobqueue.pause_type(bad, using=self.alias)
        assert not Pause.objects.using(self.alias).exists()


@requires_postgres()
@pytest.mark.django_db(databases=["default", "sqlite"])
class TestPostgresPause(PauseContract):
    alias = "default"

    def test_the_claim_reads_the_pauses_within_its_one_statement(
        self, store, django_assert_num_queries, no_declared_limits
    ):
        self.make("mail")
        store.pause("queue", "mail", "alice")
        with django_assert_num_queries(1):
            assert self.claim_all(store, ["mail"]) == set()


@pytest.mark.slow  # a load: 20,000 rows, then the planner
@requires_postgres()
@pytest.mark.django_db
def test_the_claim_with_pauses_still_reads_the_claim_index_below_the_jit_threshold():
    make_jobs(10000, JobState.READY, queue="q")
    make_jobs(10000, JobState.READY, queue="other", type=OTHER)
    jobqueue.pause("paused-queue", by="ops")
    jobqueue.pause_type(NOOP, by="ops")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE jobqueue_job")
        # As sent without rate limits (their CTEs are left out then: store/sqltext.py).
        cursor.execute("EXPLAIN " + sql("claim~rates"), claim_params(["q", "other"], max_jobs=10))
        plan = "\n".join(r[0] for r in cursor.fetchall())
    assert "Index Scan using jobqueue_job_claim" in plan, plan
    assert "Seq Scan on jobqueue_job " not in plan, plan
    assert "Bitmap Heap Scan on jobqueue_job" not in plan, plan
    cost = float(plan.splitlines()[0].split("..")[1].split()[0])
    assert cost < 20000, plan.splitlines()[0]


@pytest.mark.django_db(databases=["default", "sqlite"])
class TestGenericPause(PauseContract):
    alias = "sqlite"


# -- the admin -----------------------------------------------------------------------------


@pytest.fixture
def admin_client(client, db):
    user = User.objects.create_superuser("root", "root@example.com", "pw")
    client.force_login(user)
    return client


@pytest.mark.django_db
def test_the_admin_pauses_a_queue_through_the_store_and_logs_it(admin_client):
    job_id = make_job(JobState.READY, queue="mail").id
    response = admin_client.post(
        reverse("admin:jobqueue_pause_add"),
        {"kind": "queue", "name": "mail", "reason": "smtp down"},
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    pause = Pause.objects.get()
    assert (pause.kind, pause.name, pause.paused_by, pause.reason) == (
        "queue",
        "mail",
        "root",
        "smtp down",
    )
    assert get_store().claim(["mail"], "w1", 10, 30.0) == []
    entry = LogEntry.objects.get()
    assert (entry.action_flag, entry.object_id, entry.user.username) == (
        ADDITION,
        str(pause.pk),
        "root",
    )
    assert Job.objects.get(id=job_id).state == JobState.READY


@pytest.mark.django_db
def test_the_admin_refuses_a_bad_queue_name(admin_client):
    response = admin_client.post(
        reverse("admin:jobqueue_pause_add"), {"kind": "queue", "name": "no spaces", "reason": ""}
    )
    assert response.status_code == 200
    assert "queue name must match" in response.content.decode()
    assert not Pause.objects.exists()
    assert not LogEntry.objects.exists()


@pytest.mark.django_db
def test_the_admin_resume_action_resumes_through_the_store_and_logs_it(admin_client):
    jobqueue.pause("mail", by="ops")
    jobqueue.pause_type(NOOP, by="ops")
    pause = Pause.objects.get(kind="queue")
    response = admin_client.post(
        reverse("admin:jobqueue_pause_changelist"),
        {"action": "resume_selected", "_selected_action": [str(pause.pk)]},
    )
    assert response.status_code == 302
    assert [(p.kind, p.name) for p in Pause.objects.all()] == [("type", NOOP)]
    entry = LogEntry.objects.get()
    assert (entry.action_flag, entry.object_id, entry.user.username) == (
        DELETION,
        str(pause.pk),
        "root",
    )


@pytest.mark.django_db
def test_the_admin_lists_pauses_with_who_and_since_and_the_dashboard_shows_them(admin_client):
    jobqueue.pause("mail", by="ops", reason="smtp down")
    page = admin_client.get(reverse("admin:jobqueue_pause_changelist")).content.decode()
    assert "mail" in page and "ops" in page and "smtp down" in page
    dashboard = admin_client.get(reverse("admin:jobqueue_dashboard")).content.decode()
    assert "Paused" in dashboard and "mail" in dashboard and "ops" in dashboard


# -- the CLI (subprocesses where the database can be shared) --------------------------------


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_cli_pause_resume_and_status_of_a_type_with_exit_codes():
    from tests.jobqueue_cli import cli

    paused = cli("pause", "--type", NOOP, "--by", "ops", "--reason", "bad deploy")
    assert paused.returncode == 0, paused.stderr
    assert paused.stdout.startswith(f"Paused type {NOOP} (by ops since ")
    again = cli("pause", "--type", NOOP, "--by", "someone-else")
    assert again.returncode == 0
    assert again.stdout.startswith(f"Type {NOOP} was already paused (by ops since ")
    status = cli("status")
    assert f"Paused type {NOOP}: by ops since" in status.stdout
    assert cli("status", "--json").json()["paused_types"][0]["paused_by"] == "ops"

    resumed = cli("resume", "--type", NOOP)
    assert (resumed.returncode, resumed.stdout.strip()) == (
        0,
        f"Resumed type {NOOP}; workers claim its jobs again.",
    )
    not_paused = cli("resume", "--type", NOOP)
    assert (not_paused.returncode, not_paused.stdout.strip()) == (
        0,
        f"Type {NOOP} is not paused; nothing to resume.",
    )
    assert not Pause.objects.exists()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_cli_pause_without_by_records_the_os_user_and_resume_of_a_free_queue_says_so():
    from jobqueue.ops.who import operator_name
    from tests.jobqueue_cli import cli

    assert cli("pause", "mail").returncode == 0
    assert Pause.objects.get().paused_by == operator_name() != ""
    assert cli("resume", "mail").returncode == 0
    free = cli("resume", "mail")
    assert (free.returncode, free.stdout.strip()) == (
        0,
        "Queue mail is not paused; nothing to resume.",
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "argv, message",
    [
        (["pause", "no spaces"], "queue name must match"),
        (["pause"], "name a QUEUE, or a job type with --type"),
        (["pause", "mail", "--type", NOOP], "name a QUEUE, or a job type with --type"),
        (["resume", "bad/name"], "queue name must match"),
    ],
)
def test_cli_refuses_bad_usage_with_exit_2(argv, message):
    from tests.jobqueue_cli import cli

    result = cli(*argv, in_process=False)
    assert result.returncode == 2
    assert message in result.stderr
