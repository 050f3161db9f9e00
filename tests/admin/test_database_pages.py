"""The admin's worker, cron, pause, breaker and retry-budget pages with queues on two databases
(``default`` and ``queues2``): each lists the selected database's rows (``?db=``, as the job list)
and its actions act on the rows' own database.

Ids are per database, so the rows acted on are given the same id on both databases: an action that
went to the wrong database would change the twin there.
"""

from __future__ import annotations

import re

import pytest
from django.conf import settings
from django.test import Client, override_settings
from django.urls import reverse

import jobqueue
from jobqueue.limits.breakers import open_breaker
from jobqueue.models import Batch, CronEntry, DependencyBreaker, Job, Pause, RetryBudget, Worker

pytestmark = pytest.mark.django_db(databases=["default", "queues2"])

TWO = {"bulk": ["default", "queues2"], "reports": "queues2"}
NOOP = "tests.testapp.jobs.noop"


def changelist(model: str) -> str:
    return reverse(f"admin:jobqueue_{model}_changelist")


@pytest.fixture
def admin(admin_user) -> Client:
    client = Client()
    client.force_login(admin_user)
    return client


@pytest.fixture
def two_databases():
    with override_settings(JOBQUEUE={**settings.JOBQUEUE, "QUEUE_DATABASES": TWO}):
        yield


def text(response) -> str:
    assert response.status_code == 200, response.status_code
    return re.sub(r"\s+", " ", response.content.decode())


def same_id(model, pk_default: int, pk_queues2: int) -> int:
    """Give the ``default`` row the id of the ``queues2`` one; return that id."""
    model.objects.using("default").filter(pk=pk_default).update(id=pk_queues2)
    return pk_queues2


def post_action(admin: Client, model: str, action: str, pk: int, db: str, **extra) -> None:
    data = {"action": action, "_selected_action": [str(pk)], "post": "yes", **extra}
    response = admin.post(f"{changelist(model)}?db={db}", data)
    assert response.status_code in (200, 302), response.status_code


def test_the_workers_page_lists_the_selected_databases_workers(admin, two_databases):
    Worker.objects.using("default").create(worker_id="w-on-default", host="h", pid=1, concurrency=1)
    Worker.objects.using("queues2").create(worker_id="w-on-queues2", host="h", pid=2, concurrency=1)
    first = text(admin.get(changelist("worker")))
    assert "Queue database: <strong>default</strong>" in first
    assert "w-on-default" in first and "w-on-queues2" not in first
    second = text(admin.get(changelist("worker"), {"db": "queues2"}))
    assert "w-on-queues2" in second and "w-on-default" not in second
    assert admin.get(changelist("worker"), {"db": "nowhere"}).status_code == 400


def test_without_a_second_queue_database_the_pages_have_no_selector(admin):
    Worker.objects.create(worker_id="w-on-default", host="h", pid=1, concurrency=1)
    page = text(admin.get(changelist("worker")))
    assert "w-on-default" in page and "Queue database:" not in page


def test_a_cron_action_acts_on_the_entrys_own_database(admin, two_databases):
    on_queues2 = jobqueue.schedule("nightly", "0 3 * * *", "reports", NOOP, using="queues2")
    on_default = jobqueue.schedule("nightly", "0 3 * * *", "reports", NOOP, using="default")
    pk = same_id(CronEntry, on_default.pk, on_queues2.pk)
    listed = text(admin.get(changelist("cronentry"), {"db": "queues2"}))
    # Its row links to its page on its own database.
    assert re.search(rf'href="[^"]*/cronentry/{pk}/change/\?[^"]*\bdb=queues2"', listed)
    post_action(admin, "cronentry", "disable", pk, "queues2")
    assert CronEntry.objects.using("queues2").get(pk=pk).enabled is False
    assert CronEntry.objects.using("default").get(pk=pk).enabled is True


def test_a_cron_entry_added_in_the_admin_lives_where_its_queue_does(admin, two_databases):
    data = {
        "name": "weekly",
        "cron_expr": "0 3 * * 1",
        "timezone": "UTC",
        "queue": "reports",  # lives on queues2 only
        "job_type": NOOP,
        "payload": "{}",
        "priority": "0",
        "missed": "once",
        "missed_cap": "10",
        "enabled": "on",
    }
    response = admin.post(reverse("admin:jobqueue_cronentry_add"), data)
    assert response.status_code == 302, text(response)
    assert list(CronEntry.objects.using("queues2").values_list("name", flat=True)) == ["weekly"]
    assert not CronEntry.objects.using("default").exists()


def test_closing_a_breaker_acts_on_its_own_database(admin, two_databases):
    open_breaker("partner", 600, using="queues2")
    open_breaker("partner", 600, using="default")
    pk = same_id(
        DependencyBreaker,
        DependencyBreaker.objects.using("default").get(name="partner").pk,
        DependencyBreaker.objects.using("queues2").get(name="partner").pk,
    )
    assert "partner" in text(admin.get(changelist("dependencybreaker"), {"db": "queues2"}))
    post_action(admin, "dependencybreaker", "close_selected", pk, "queues2")
    assert DependencyBreaker.objects.using("queues2").get(pk=pk).state == "closed"
    assert DependencyBreaker.objects.using("default").get(pk=pk).state == "open"


def test_resuming_a_pause_acts_on_its_own_database(admin, two_databases):
    jobqueue.pause("bulk", by="ops")  # both databases the queue lives on
    pk = same_id(
        Pause,
        Pause.objects.using("default").get(name="bulk").pk,
        Pause.objects.using("queues2").get(name="bulk").pk,
    )
    post_action(admin, "pause", "resume_selected", pk, "queues2")
    assert not Pause.objects.using("queues2").filter(name="bulk").exists()
    assert Pause.objects.using("default").filter(name="bulk").exists()


def test_a_pause_added_in_the_admin_pauses_every_database_of_the_queue(admin, two_databases):
    data = {"kind": "queue", "name": "bulk", "reason": "deploy"}
    response = admin.post(f"{reverse('admin:jobqueue_pause_add')}?db=queues2", data)
    assert response.status_code == 302
    for alias in ("default", "queues2"):
        assert Pause.objects.using(alias).filter(name="bulk", reason="deploy").exists(), alias


def test_deleting_a_retry_budget_acts_on_its_own_database(admin, two_databases):
    on_queues2 = RetryBudget.objects.using("queues2").create(queue="bulk", tokens=-3.0)
    on_default = RetryBudget.objects.using("default").create(queue="bulk", tokens=-3.0)
    pk = same_id(RetryBudget, on_default.pk, on_queues2.pk)
    post_action(admin, "retrybudget", "delete_selected", pk, "queues2")
    assert not RetryBudget.objects.using("queues2").filter(queue="bulk").exists()
    assert RetryBudget.objects.using("default").filter(queue="bulk").exists()


def test_the_batches_page_reads_the_selected_database_and_links_there(admin, two_databases):
    with jobqueue.batch(queue="reports") as b:  # stored with its queue, on queues2
        b.enqueue("reports", NOOP, {})
    assert Batch.objects.using("queues2").filter(id=b.id).exists()
    page = text(admin.get(reverse("admin:jobqueue_batch_change", args=[b.id]), {"db": "queues2"}))
    members = f"{changelist('job')}?batch_id={b.id}&amp;db=queues2"
    assert members in page and "1 members" in page
    listed = text(admin.get(changelist("batch"), {"db": "queues2"}))
    assert re.search(rf'href="[^"]*/batch/{b.id}/change/\?[^"]*\bdb=queues2"', listed)
    # A member's page links back to the batch on its database.
    [member] = Job.objects.using("queues2").filter(batch_id=b.id)
    job_page = text(
        admin.get(reverse("admin:jobqueue_job_change", args=[member.id]), {"db": "queues2"})
    )
    assert f"/batch/{b.id}/change/?db=queues2" in job_page


def test_the_dashboard_links_each_breaker_to_its_own_database(admin, two_databases):
    open_breaker("partner", 600, using="queues2")
    page = text(admin.get(reverse("admin:jobqueue_dashboard"), {"refresh": "0"}))
    assert f'href="{changelist("dependencybreaker")}?q=partner&amp;db=queues2"' in page
    assert "on queues2" in page
