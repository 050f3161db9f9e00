"""Queues on several databases (``JOBQUEUE["QUEUE_DATABASES"]``): routing, enqueue, checks,
the migration router, cron entries per alias.

Two queue databases: ``default`` and ``queues2`` (tests/settings.py: a second database on the
same PostgreSQL server, or a second SQLite file). The worker side is tests/process/test_shards.py.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import zlib

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

import jobqueue
from jobqueue import checks
from jobqueue.cron.entries import reconcile_settings
from jobqueue.errors import InvalidJobOption, JobQueueConfigurationError
from jobqueue.models import CronEntry, Job, Pause
from jobqueue.routers import QueueDatabaseRouter
from jobqueue.routing import all_queue_aliases, queue_alias, queue_aliases
from jobqueue.settings.conf import build_settings
from jobqueue.settings.databases import shard_index
from jobqueue.worker.aliases import AliasShare, alias_shares
from tests.conftest import ROOT, subprocess_env

NOOP = "tests.testapp.jobs.noop"
ROUTER = "jobqueue.routers.QueueDatabaseRouter"

pytestmark = pytest.mark.django_db(databases=["default", "queues2"])


def placed(queue_databases: dict) -> override_settings:
    return override_settings(JOBQUEUE={**settings.JOBQUEUE, "QUEUE_DATABASES": queue_databases})


SHARDED = {"bulk": ["default", "queues2"], "emails": "queues2"}


# -- the shard hash and the routing calls ------------------------------------------------------


def test_the_shard_is_crc32_of_the_ordering_key_else_dedupe_key_else_tenant():
    # Fixed values: the same in every process and release (hash() would differ per process).
    assert [shard_index(2, tenant_id=t) for t in ("acme", "globex", "t1")] == [0, 0, 1]
    assert shard_index(3, tenant_id="acme") == zlib.crc32(b"acme") % 3 == 2
    # "o1" -> 1 wins over dedupe "d1" -> 0 and tenant "acme" -> 0.
    assert shard_index(2, tenant_id="acme", dedupe_key="d1", ordering_key="o1") == 1
    assert shard_index(2, tenant_id="t1", dedupe_key="d1") == 0
    assert shard_index(1, tenant_id="t1") == 0


def test_jobs_with_no_key_and_no_tenant_are_dealt_evenly():
    shards = [shard_index(2) for _ in range(100)]
    assert shards.count(0) == shards.count(1) == 50


def test_a_hash_is_the_same_in_another_process():
    code = (
        "from jobqueue.settings.databases import shard_index as s; print(s(7, tenant_id='acme-42'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert int(out.stdout) == shard_index(7, tenant_id="acme-42")


def test_without_the_setting_every_queue_lives_on_default():
    assert queue_aliases("bulk") == ("default",)
    assert queue_alias("bulk", tenant_id="acme") == "default"
    assert all_queue_aliases() == ("default",)


def test_the_setting_places_queues_and_star_takes_the_rest():
    with placed({"emails": "queues2", "bulk": ["queues2", "default"], "*": "queues2"}):
        assert queue_aliases("emails") == ("queues2",)
        assert queue_aliases("bulk") == ("queues2", "default")
        assert queue_aliases("anything") == ("queues2",)
        assert queue_alias("bulk", tenant_id="t1") == "default"  # shard 1
        assert all_queue_aliases() == ("queues2", "default")
    with placed({"emails": "queues2"}):
        assert queue_aliases("other") == ("default",)
        assert all_queue_aliases() == ("default", "queues2")


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (["queues2"], "must be a dict"),
        ({"bad name!": "queues2"}, "key 'bad name!'"),
        ({"bulk": []}, "non-empty list"),
        ({"bulk": ["a", "a"]}, "lists an alias twice"),
        ({"bulk": ["a", 3]}, "non-empty strings"),
        ({"bulk": 3}, "must be a database alias"),
    ],
)
def test_a_bad_setting_is_refused_naming_it(value, says):
    with pytest.raises(JobQueueConfigurationError, match="QUEUE_DATABASES") as error:
        build_settings({"QUEUE_DATABASES": value})
    assert says in str(error.value)


# -- enqueue and enqueue_many -------------------------------------------------------------------


def on(alias: str) -> set[tuple[str, str]]:
    return set(Job.objects.using(alias).values_list("queue", "tenant_id"))


def test_a_sharded_queue_spreads_its_jobs_by_tenant_over_both_aliases():
    tenants = [f"tenant-{n}" for n in range(20)]
    with placed(SHARDED):
        for tenant in tenants:
            jobqueue.enqueue("bulk", NOOP, tenant_id=tenant)
        expected = {t: queue_alias("bulk", tenant_id=t) for t in tenants}
    assert set(expected.values()) == {"default", "queues2"}
    for alias in ("default", "queues2"):
        assert on(alias) == {("bulk", t) for t, where in expected.items() if where == alias}


def test_an_unsharded_queue_goes_to_its_alias_and_the_rest_stays_on_default():
    with placed(SHARDED):
        emails = jobqueue.enqueue("emails", NOOP, tenant_id="a")
        other = jobqueue.enqueue("other", NOOP, tenant_id="b")
    assert Job.objects.using("queues2").get(id=emails).queue == "emails"
    assert Job.objects.using("default").get(id=other).queue == "other"
    assert on("default") == {("other", "b")} and on("queues2") == {("emails", "a")}


def test_an_explicit_using_wins_over_the_setting():
    with placed(SHARDED):
        job_id = jobqueue.enqueue("emails", NOOP, using="default")
    assert Job.objects.using("default").get(id=job_id).queue == "emails"
    assert not Job.objects.using("queues2").exists()


def test_a_dedupe_key_finds_its_live_job_on_its_shard():
    with placed(SHARDED):
        first = jobqueue.enqueue("bulk", NOOP, dedupe_key="nightly", tenant_id="x")
        again = jobqueue.enqueue("bulk", NOOP, dedupe_key="nightly", tenant_id="y")
        alias = queue_alias("bulk", dedupe_key="nightly")
    assert first == again
    assert Job.objects.using(alias).filter(dedupe_key="nightly").count() == 1
    other = "queues2" if alias == "default" else "default"
    assert not Job.objects.using(other).exists()


def test_enqueue_many_splits_a_batch_by_shard_and_keeps_input_order():
    jobs = [
        {"queue": "bulk", "job_type": NOOP, "payload": {"n": n}, "tenant_id": f"t{n}"}
        for n in range(30)
    ]
    jobs.insert(5, {"queue": "emails", "job_type": NOOP, "payload": {"n": "mail"}})
    with placed(SHARDED):
        ids = jobqueue.enqueue_many(jobs)
        where = [queue_alias(j["queue"], tenant_id=j.get("tenant_id", "")) for j in jobs]
    assert set(where) == {"default", "queues2"}
    for job, job_id, alias in zip(jobs, ids, where, strict=True):
        assert Job.objects.using(alias).get(id=job_id).payload == job["payload"]
    for alias in ("default", "queues2"):
        assert Job.objects.using(alias).count() == where.count(alias)


def test_enqueue_many_with_an_explicit_using_writes_one_alias():
    jobs = [{"queue": "bulk", "job_type": NOOP, "tenant_id": f"t{n}"} for n in range(10)]
    with placed(SHARDED):
        jobqueue.enqueue_many(jobs, using="queues2")
    assert Job.objects.using("queues2").count() == 10
    assert not Job.objects.using("default").exists()


# -- cron: each settings entry lives on its queue's alias ----------------------------------------


def test_each_cron_entry_is_kept_by_the_scheduler_of_its_queues_alias():
    cron = {
        "mail": {"cron_expr": "* * * * *", "job_type": NOOP, "queue": "emails"},
        "rest": {"cron_expr": "* * * * *", "job_type": NOOP, "queue": "other"},
    }
    with override_settings(
        JOBQUEUE={**settings.JOBQUEUE, "QUEUE_DATABASES": SHARDED, "CRON": cron}
    ):
        reconcile_settings("default")
        reconcile_settings("queues2")
    enabled = {
        alias: set(
            CronEntry.objects.using(alias).filter(enabled=True).values_list("name", flat=True)
        )
        for alias in ("default", "queues2")
    }
    assert enabled == {"default": {"rest"}, "queues2": {"mail"}}


# -- checks and the migration router --------------------------------------------------------------


def test_an_alias_not_in_databases_is_e022():
    with placed({"bulk": ["default", "nowhere"]}):
        messages = checks.check_queue_databases()
        assert [m.id for m in messages] == ["jobqueue.E022", "jobqueue.W023"]
        assert "'nowhere'" in messages[0].msg
        with pytest.raises(SystemCheckError, match=r"jobqueue\.E022"):
            call_command("check", databases=["default"])


def test_queues_off_default_without_the_router_is_w023_and_with_it_silent():
    with placed(SHARDED):
        assert [m.id for m in checks.check_queue_databases()] == ["jobqueue.W023"]
        with override_settings(DATABASE_ROUTERS=[ROUTER]):
            assert checks.check_queue_databases() == []
    assert checks.check_queue_databases() == []


def test_the_router_allows_jobqueue_on_queue_aliases_and_default_only():
    router = QueueDatabaseRouter()
    with placed({"emails": "queues2"}):
        assert router.allow_migrate("queues2", "jobqueue", "job") is True
        assert router.allow_migrate("default", "jobqueue", "job") is True
        assert router.allow_migrate("sqlite", "jobqueue", "job") is False
        assert router.allow_migrate("sqlite", "auth", "user") is None


def tables(path) -> set[str]:
    with sqlite3.connect(path) as db:
        rows = db.execute("select name from sqlite_master where type = 'table'").fetchall()
    return {name for (name,) in rows}


def test_migrate_creates_jobqueue_tables_only_where_queues_live(tmp_path):
    env = subprocess_env(QUEUE_DATABASES={"emails": "shard"}, ENQUEUE_UNREGISTERED=True)
    env["JOBQUEUE_TEST_ROUTERS"] = ROUTER
    env["JOBQUEUE_TEST_EXTRA_SQLITE"] = f"shard={tmp_path / 's.db'},other={tmp_path / 'o.db'}"
    for alias in ("shard", "other"):
        subprocess.run(
            [sys.executable, "-m", "django", "migrate", "-v", "0", "--database", alias],
            env=env,
            cwd=ROOT,
            check=True,
        )
    assert {"jobqueue_job", "jobqueue_cronentry", "auth_user"} <= tables(tmp_path / "s.db")
    other = tables(tmp_path / "o.db")
    assert "auth_user" in other
    assert not {t for t in other if t.startswith("jobqueue_")}


# -- pauses: on every alias the queue lives on --------------------------------------------------


def test_a_pause_of_a_sharded_queue_holds_on_every_alias_and_resume_lifts_all():
    def paused_on() -> set[str]:
        return {a for a in ("default", "queues2") if Pause.objects.using(a).filter(name="bulk")}

    with placed(SHARDED):
        assert jobqueue.pause("bulk", by="ops") is True
        assert paused_on() == {"default", "queues2"}
        assert jobqueue.pause("bulk", by="ops") is False
        assert jobqueue.resume("bulk") is True
        assert paused_on() == set()
        jobqueue.pause("emails", by="ops")
    assert set(Pause.objects.using("queues2").values_list("name", flat=True)) == {"emails"}
    assert not Pause.objects.using("default").exists()


def test_a_queue_placed_on_an_alias_not_in_databases_is_refused_writing_nothing():
    with placed({"emails": "nowhere"}):
        with pytest.raises(InvalidJobOption, match="'nowhere', which is not in DATABASES"):
            jobqueue.enqueue("emails", NOOP)
        with pytest.raises(InvalidJobOption, match="'nowhere'"):
            jobqueue.enqueue_many(
                [{"queue": "other", "job_type": NOOP}, {"queue": "emails", "job_type": NOOP}]
            )
    assert not Job.objects.exists() and not Job.objects.using("queues2").exists()


# -- which queues a runworkers serves on each alias ---------------------------------------------


def test_runworkers_serves_each_queue_on_its_aliases_and_star_on_every_queue_alias():
    with placed({"emails": "queues2", "bulk": ["default", "queues2"]}):
        shares = alias_shares(("emails", "bulk", "*"), (3, 2, 1))
        assert shares == (
            AliasShare("queues2", ("emails", "bulk", "*"), (3, 2, 1)),
            AliasShare("default", ("bulk", "*"), (2, 1)),
        )
        only = alias_shares(("emails",), (1,), "default")
        assert only == (AliasShare("default", ("emails",), (1,)),)
    assert alias_shares(("emails", "bulk"), (1, 1)) == (
        AliasShare("default", ("emails", "bulk"), (1, 1)),
    )


# -- chains and batches: their jobs share one database, where their queues live ----------------

REPORT = "tests.testapp.jobs.batch_report"


def test_a_chain_of_a_queue_on_another_database_is_stored_there_whole():
    with placed(SHARDED):
        first, second = jobqueue.chain(
            jobqueue.step(NOOP, queue="emails"), jobqueue.step(NOOP, queue="emails")
        )
    stored = Job.objects.using("queues2")
    assert stored.get(id=first).state == "ready"
    assert stored.get(id=second).state == "waiting"
    assert not Job.objects.using("default").exists()


def test_a_chain_across_databases_is_refused_naming_the_step_and_writes_nothing():
    with placed(SHARDED), pytest.raises(InvalidJobOption) as refused:
        jobqueue.chain(jobqueue.step(NOOP, queue="emails"), jobqueue.step(NOOP, queue="other"))
    assert refused.value.option == "steps[1].queue"
    assert "'other' lives on 'default'" in str(refused.value)
    assert not Job.objects.using("queues2").exists()
    assert not Job.objects.using("default").exists()


def test_a_batch_lives_where_its_callbacks_queue_does_and_refuses_members_elsewhere():
    with placed(SHARDED):
        with jobqueue.batch(on_complete=REPORT, queue="emails") as b:
            member = b.enqueue("emails", NOOP)
        assert jobqueue.batch_status(b.id, using="queues2").total == 1
        assert Job.objects.using("queues2").get(id=member).batch_id == b.id
        with pytest.raises(InvalidJobOption) as refused:
            with jobqueue.batch(on_complete=REPORT, queue="emails") as other:
                other.enqueue("emails", NOOP)
                other.enqueue("other", NOOP)
        assert refused.value.option == "queue"
        # The block is all or nothing: the batch and its first member are gone too.
        assert Job.objects.using("queues2").count() == 1
        assert not Job.objects.using("default").exists()
