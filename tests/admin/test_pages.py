"""The admin, through Django's test client: pages, every action, permissions and the edges.

Runs on PostgreSQL and SQLite (the estimated-count tests need PostgreSQL). Actions are posted the
way the changelist form posts them: ``action``, ``_selected_action`` ids, ``index``, and, on a
confirmation page, ``post=yes``.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.contrib.messages import get_messages
from django.db import connection
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

import jobqueue
from jobqueue.admin import paginator as paginator_module
from jobqueue.models import Job, Worker
from jobqueue.states import DeadReason, JobState
from tests.conftest import requires_postgres
from tests.factories import error_entry, make_job, make_jobs

pytestmark = pytest.mark.django_db

JOBS = reverse("admin:jobqueue_job_changelist")
DEAD = reverse("admin:jobqueue_deadletter_changelist")
WORKERS = reverse("admin:jobqueue_worker_changelist")
DASHBOARD = reverse("admin:jobqueue_dashboard")


def detail(job_id: int, model: str = "job") -> str:
    return reverse(f"admin:jobqueue_{model}_change", args=[job_id])


def user_with(*codenames: str, username: str | None = None) -> User:
    user = User.objects.create_user(username or "_".join(codenames) or "nobody", is_staff=True)
    for codename in codenames:
        user.user_permissions.add(Permission.objects.get(codename=codename))
    return user


def client_for(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def admin(admin_user) -> Client:
    return client_for(admin_user)


@pytest.fixture
def viewer() -> Client:
    return client_for(user_with("view_job", username="viewer"))


def state(job_id: int) -> str:
    return Job.objects.get(id=job_id).state


def messages_of(response) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def act(client: Client, url: str, action: str, ids: list[int], **extra: Any):
    """Post an action from the changelist form (no confirmation yet)."""
    data = {"action": action, "index": "0", "_selected_action": [str(i) for i in ids], **extra}
    return client.post(url, data)


def confirm(client: Client, url: str, action: str, ids: list[int], **extra: Any):
    """Post the confirmation page's form ("Yes, I'm sure")."""
    data = {"action": action, "post": "yes", "_selected_action": [str(i) for i in ids], **extra}
    return client.post(url, data)


def text(response) -> str:
    return re.sub(r"\s+", " ", response.content.decode())


# -- pages -----------------------------------------------------------------------------------


def test_job_list_shows_the_columns_and_a_state_badge(admin):
    job = make_job(
        JobState.DEAD,
        type="shop.jobs.charge",
        queue="payments",
        tenant_id="acme",
        priority=5,
        max_attempts=3,
        errors=[error_entry(n, message=f"card declined {n}") for n in (1, 2, 3)],
    )
    response = admin.get(JOBS)
    assert response.status_code == 200
    page = text(response)
    for header in ("job type", "queue", "state", "tenant id", "priority", "attempts"):
        assert f">{header}<" in page.lower() or header in page.lower()
    assert "shop.jobs.charge" in page and "payments" in page and "acme" in page
    assert 'class="jq-state jq-state-dead"' in page
    assert "3/3" in page
    assert "ConnectionError: card declined 3" in page  # the newest error, short
    assert reverse("admin:jobqueue_job_add") not in page
    assert detail(job.id) in page


def test_jobs_are_read_only_for_everyone(admin):
    job = make_job(JobState.READY)
    assert admin.get(reverse("admin:jobqueue_job_add")).status_code == 403
    assert admin.get(reverse("admin:jobqueue_job_delete", args=[job.id])).status_code == 403
    response = admin.post(detail(job.id), {"state": JobState.SUCCEEDED, "queue": "x"})
    assert response.status_code == 403
    assert state(job.id) == JobState.READY
    page = text(admin.get(detail(job.id)))
    assert 'name="_save"' not in page
    assert "delete_selected" not in text(admin.get(JOBS))


def test_detail_shows_masked_pretty_payload_history_lease_and_result(admin):
    payload = {
        "order": 42,
        "Password": "hunter2",
        "customer": {"name": "Ada", "api_token": "tok_123", "cards": [{"number": "4111"}]},
        "items": [{"sku": "A", "secret_note": "x"}],
        "note": "n" * 1000,
    }
    job = make_job(
        JobState.LEASED,
        payload=payload,
        result=None,
        errors=[error_entry(1, message="timeout talking to bank")],
    )
    page = text(admin.get(detail(job.id)))
    for secret in ("hunter2", "tok_123", "4111"):
        assert secret not in page
    assert "&quot;Password&quot;: &quot;********&quot;" in page
    assert "&quot;api_token&quot;: &quot;********&quot;" in page
    assert "&quot;cards&quot;: &quot;********&quot;" in page  # the whole value under a masked key
    assert "&quot;secret_note&quot;: &quot;********&quot;" in page  # inside a list
    assert "&quot;name&quot;: &quot;Ada&quot;" in page
    assert "(700 more characters)" in page
    whole = reverse("admin:jobqueue_job_json", args=[job.id, "payload"])
    assert f'href="{whole}"' in page
    # The error history: attempt, worker, exception, message, traceback in <pre>.
    assert "timeout talking to bank" in page
    assert '<pre class="jq-traceback">Traceback (most recent call last):' in page
    assert "factory-worker" in page  # lease holder and history worker
    assert str(job.lease_token) in page


def test_json_view_gives_the_whole_value_still_masked(admin, viewer):
    job = make_job(payload={"note": "n" * 1000, "deep": [{"authorization": "Bearer x"}]})
    url = reverse("admin:jobqueue_job_json", args=[job.id, "payload"])
    response = admin.get(url)
    assert response.status_code == 200
    assert response.json() == {"note": "n" * 1000, "deep": [{"authorization": "********"}]}
    assert viewer.get(url).status_code == 200
    bad = reverse("admin:jobqueue_job_json", args=[job.id, "errors"])
    assert admin.get(bad).status_code == 404
    nobody = client_for(user_with(username="nobody"))
    assert nobody.get(url).status_code == 403


def test_masked_keys_come_from_the_setting(admin):
    job = make_job(payload={"iban": "DE00", "password": "visible now"})
    with override_settings(JOBQUEUE={"ADMIN_MASKED_KEYS": ["IBAN"]}):
        page = text(admin.get(detail(job.id)))
    assert "DE00" not in page and "visible now" in page
    with override_settings(JOBQUEUE={"ADMIN_MASKED_KEYS": []}):
        assert "DE00" in text(admin.get(detail(job.id)))


def test_dead_letter_page_lists_only_dead_jobs_with_reason_and_dead_at(admin):
    dead = make_job(JobState.DEAD, dead_reason=DeadReason.PERMANENT_ERROR)
    expired = make_job(JobState.DEAD)
    expired.errors = [*expired.errors, {"kind": "lease_expired", "message": "lease expired"}]
    expired.save()
    alive = make_job(JobState.READY)
    page = text(admin.get(DEAD))
    assert detail(dead.id, "deadletter") in page
    assert detail(alive.id, "deadletter") not in page
    assert "permanent error" in page
    assert "attempts exhausted (lease expired)" in page
    assert timezone.localtime(dead.finished_at).strftime("%Y-%m-%d %H:%M") in page
    # Filter choices include the types and queues that have dead letters, registered or not.
    make_job(JobState.DEAD, type="retired.jobs.old_thing", queue="legacy")
    assert "?type=retired.jobs.old_thing" in page or "?type=retired.jobs.old_thing" in text(
        admin.get(DEAD)
    )
    assert "?queue=legacy" in text(admin.get(DEAD))
    only_permanent = text(admin.get(DEAD, {"reason": "permanent_error"}))
    assert detail(dead.id, "deadletter") in only_permanent
    assert detail(expired.id, "deadletter") not in only_permanent


def test_worker_page_is_read_only_and_tells_alive_from_dead(admin):
    now = timezone.now()
    Worker.objects.create(worker_id="w-up", host="h1", pid=1, concurrency=4, queues=["a"])
    Worker.objects.create(
        worker_id="w-gone",
        host="h2",
        pid=2,
        concurrency=4,
        queues=["a", "b"],
        last_seen_at=now - timedelta(hours=1),
    )
    page = text(admin.get(WORKERS))
    assert "w-up" in page and "w-gone" in page and "a, b" in page
    assert page.count('alt="True"') == 1 and page.count('alt="False"') == 1
    # A killed process never reports "stopped": its last status is not shown as current.
    assert page.count("silent (last: running)") == 1
    dashboard = text(admin.get(DASHBOARD))
    assert dashboard.count("silent (last: running)") == 1
    assert admin.get(reverse("admin:jobqueue_worker_add")).status_code == 403


def test_worker_page_shows_whether_each_listener_is_up(admin):
    """FIELD-CASES 26: a lost LISTEN connection shows in the worker list."""
    Worker.objects.create(worker_id="w-deaf", host="h1", pid=1, concurrency=4, listener_up=False)
    page = text(admin.get(WORKERS))
    assert "listening" in page.lower()
    # alive (True) and listening (False): one of each icon.
    assert page.count('alt="True"') == 1 and page.count('alt="False"') == 1


# -- filters and search ----------------------------------------------------------------------


def ids_on(response) -> set[int]:
    return {int(i) for i in re.findall(r'name="_selected_action" value="(\d+)"', text(response))}


def test_filters_state_retrying_queue_type_tenant_and_date(admin):
    delayed = make_job(JobState.SCHEDULED).id
    retrying = make_job(JobState.SCHEDULED, attempts=2, errors=[error_entry(1)]).id
    emails = make_job(JobState.READY, queue="emails", type="shop.jobs.receipt").id
    acme = make_job(JobState.SUCCEEDED, tenant_id="acme").id
    old = make_job(JobState.READY, created_at=timezone.now() - timedelta(days=400)).id
    assert ids_on(admin.get(JOBS, {"state": "scheduled"})) == {delayed, retrying}
    assert ids_on(admin.get(JOBS, {"state": "retrying"})) == {retrying}
    assert ids_on(admin.get(JOBS, {"queue": "emails"})) == {emails}
    assert ids_on(admin.get(JOBS, {"type": "shop.jobs.receipt"})) == {emails}
    response = admin.get(JOBS, {"tenant": "acme", "state": "succeeded"})
    assert ids_on(response) == {acme}
    # The tenant box keeps the other filters as hidden fields.
    assert '<input type="hidden" name="state" value="succeeded">' in text(response)
    this_year = timezone.localtime().replace(month=1, day=1, hour=0, minute=0, second=0)
    response = admin.get(JOBS, {"created_at__gte": str(this_year)})
    assert old not in ids_on(response) and delayed in ids_on(response)


def test_a_scheduled_job_whose_run_at_has_come_counts_as_ready(admin):
    """DESIGN's lifecycle: scheduled -> ready when run_at is due (storage skips the step)."""
    due = make_job(JobState.SCHEDULED, run_at=timezone.now() - timedelta(seconds=5)).id
    ready = make_job(JobState.READY).id
    waiting = make_job(JobState.SCHEDULED).id
    assert ids_on(admin.get(JOBS, {"state": "ready"})) == {due, ready}
    assert ids_on(admin.get(JOBS, {"state": "scheduled"})) == {waiting}
    page = text(admin.get(DASHBOARD))
    assert (cell(page, "default", "ready"), cell(page, "default", "scheduled")) == ("2", "1")
    assert "scheduled (due)" in text(admin.get(detail(due)))


def test_filter_choices_never_scan_the_jobs_table(admin, monkeypatch):
    # Count exactly whatever the planner guesses: a test before this one in the same database
    # (test_fairness inserts 20,000 rows, rolled back) leaves pages that inflate its estimate.
    monkeypatch.setattr(paginator_module, "EXACT_COUNT_BELOW", 2**62)
    make_jobs(5, JobState.READY, queue="emails")
    Worker.objects.create(worker_id="w", host="h", pid=1, concurrency=1, queues=["reports"])
    with CaptureQueriesContext(connection) as queries:
        page = text(admin.get(JOBS))
    job_queries = [q["sql"] for q in queries if "jobqueue_job" in q["sql"]]
    assert not any("DISTINCT" in sql.upper() for sql in job_queries), job_queries
    # The page itself and the count (exact here: the table is small; on PostgreSQL the
    # planner's estimate is asked first).
    reads = [sql for sql in job_queries if not sql.startswith("EXPLAIN")]
    # Plus one bounded read for the job-type choices: the types of the newest 1,000 jobs, by
    # primary key (types in use that this process never registered, e.g. django.tasks tasks).
    recent_types = [
        sql for sql in reads if sql.endswith('ORDER BY "jobqueue_job"."id" DESC LIMIT 1000')
    ]
    assert len(recent_types) == 1 and len(reads) == 3, job_queries
    # Queue choices come from settings, job types and worker rows; a queue only in the jobs
    # table is reachable by link (the dashboard links every queue).
    assert "?queue=reports" in page and "?queue=default" in page
    assert "?queue=emails" in text(admin.get(JOBS, {"queue": "emails"}))


def test_search_by_id_type_fragment_and_dedupe_key(admin):
    a = make_job(type="shop.jobs.send_receipt", dedupe_key="receipt:1").id
    b = make_job(type="shop.jobs.charge").id
    assert ids_on(admin.get(JOBS, {"q": str(a)})) == {a}
    assert ids_on(admin.get(JOBS, {"q": f"#{b}"})) == {b}
    assert ids_on(admin.get(JOBS, {"q": "receipt"})) == {a}
    assert ids_on(admin.get(JOBS, {"q": "receipt:1"})) == {a}
    assert ids_on(admin.get(JOBS, {"q": "nothing-like-it"})) == set()


# -- actions ---------------------------------------------------------------------------------


def test_cancel_asks_for_confirmation_then_cancels_and_reports_the_skipped(admin):
    ready, scheduled, dead = (make_job(s).id for s in ("ready", "scheduled", "dead"))
    done = make_job(JobState.SUCCEEDED).id
    ids = [ready, scheduled, dead, done]
    response = act(admin, JOBS, "cancel_jobs", ids)
    assert response.status_code == 200
    page = text(response)
    assert "You are about to <strong>cancel 3 jobs</strong>" in page
    assert "1 of the selected jobs is already finished and will be skipped." in page
    assert {state(i) for i in (ready, scheduled, dead)} == {"ready", "scheduled", "dead"}
    for job_id in ids:  # the form carries the selection on
        assert f'name="_selected_action" value="{job_id}"' in page
    response = confirm(admin, JOBS, "cancel_jobs", ids)
    assert response.status_code == 302
    assert [state(i) for i in (ready, scheduled, dead, done)] == [
        "cancelled",
        "cancelled",
        "cancelled",
        "succeeded",
    ]
    assert messages_of(response) == [
        "Cancelled 3 jobs.",
        f"Skipped 1 job that is already finished (now: #{done} is succeeded).",
    ]


def test_cancel_of_a_running_job_goes_through_the_client(admin):
    job = make_job(JobState.LEASED)
    response = confirm(admin, JOBS, "cancel_jobs", [job.id])
    row = Job.objects.get(id=job.id)
    # The client decides: cancelled at once, or a cancel request the worker honours.
    if row.state == JobState.CANCELLED:
        assert messages_of(response) == ["Cancelled 1 job."]
    else:
        assert row.state == JobState.LEASED and row.cancel_requested_at is not None
        assert "Asked 1 running job to cancel" in messages_of(response)[-1]


def test_retry_resets_the_budget_keeps_history_and_skips_what_changed_since_page_load(admin):
    dead = make_job(JobState.DEAD, max_attempts=3).id
    cancelled = make_job(JobState.CANCELLED).id
    raced = make_job(JobState.DEAD).id
    page = text(admin.get(DEAD))  # the operator loads the page...
    assert f'value="{raced}"' in page
    jobqueue.retry(raced)  # ...someone else retries one of them meanwhile...
    Job.objects.filter(id=raced).update(state=JobState.LEASED)  # ...and a worker took it.
    ids = [dead, cancelled, raced]
    response = act(admin, JOBS, "retry_jobs", ids)
    assert "You are about to <strong>retry 2 jobs</strong>" in text(response)
    response = confirm(admin, JOBS, "retry_jobs", ids)
    assert messages_of(response) == [
        "Retried 2 jobs.",
        f"Skipped 1 job that is not dead or cancelled (now: #{raced} is leased).",
    ]
    for job_id in (dead, cancelled):
        row = Job.objects.get(id=job_id)
        assert (row.state, row.attempts, row.finished_at) == ("ready", 0, None)
        assert row.errors[-1]["kind"] == "operator_retry"
    assert len(Job.objects.get(id=dead).errors) == 4
    assert state(raced) == JobState.LEASED


def test_retry_reports_a_dedupe_key_held_by_a_live_job_and_a_vanished_job(admin):
    held = make_job(JobState.DEAD, queue="q", dedupe_key="order:9").id
    live = jobqueue.enqueue("q", "tests.testapp.jobs.noop", dedupe_key="order:9")
    gone = make_job(JobState.DEAD).id
    Job.objects.filter(id=gone).delete()
    response = confirm(admin, DEAD, "retry_jobs", [held, gone])
    assert messages_of(response) == [
        f"Skipped 1 job whose dedupe key a live job holds: #{held} (held by #{live}).",
        f"Skipped 1 job that no longer exists (#{gone}).",
    ]
    assert state(held) == JobState.DEAD and state(live) == JobState.READY


def test_run_now_needs_no_confirmation_and_skips_a_job_claimed_meanwhile(admin):
    waiting = make_job(JobState.SCHEDULED, attempts=1, errors=[error_entry(1)]).id
    claimed = make_job(JobState.SCHEDULED).id
    Job.objects.filter(id=claimed).update(state=JobState.LEASED)
    response = act(admin, JOBS, "run_jobs_now", [waiting, claimed])
    assert response.status_code == 302
    assert messages_of(response) == [
        "Made ready 1 job.",
        f"Skipped 1 job that is not scheduled (now: #{claimed} is leased).",
    ]
    row = Job.objects.get(id=waiting)
    assert (row.state, row.attempts) == ("ready", 1)


def test_nothing_eligible_says_so_and_changes_nothing(admin):
    done = make_job(JobState.SUCCEEDED).id
    page = text(act(admin, JOBS, "retry_jobs", [done]))
    assert "None of the selected jobs can retry: it is not dead or cancelled." in page
    response = confirm(admin, JOBS, "retry_jobs", [done])
    assert messages_of(response) == [
        f"Skipped 1 job that is not dead or cancelled (now: #{done} is succeeded)."
    ]
    assert state(done) == JobState.SUCCEEDED


def test_select_all_retries_every_dead_letter_matching_the_filters_in_one_request(admin):
    wanted = [j.id for j in make_jobs(1200, JobState.DEAD, type="shop.jobs.charge")]
    other = make_job(JobState.DEAD, type="shop.jobs.receipt").id
    url = f"{DEAD}?type=shop.jobs.charge"
    page_ids = wanted[-50:]  # the boxes ticked on the first page
    response = act(admin, url, "retry_jobs", page_ids, select_across="1")
    page = text(response)
    assert "You are about to <strong>retry 1200 jobs</strong> (every job matching" in page
    assert '<input type="hidden" name="select_across" value="1">' in page
    assert 'action="/admin/jobqueue/deadletter/?type=shop.jobs.charge"' in page
    response = confirm(admin, url, "retry_jobs", page_ids, select_across="1")
    assert messages_of(response) == ["Retried 1200 jobs."]
    assert Job.objects.filter(id__in=wanted, state=JobState.READY).count() == 1200
    assert state(other) == JobState.DEAD


def test_detail_page_buttons_act_on_that_job_and_return_to_it(admin):
    job = make_job(JobState.DEAD)
    page = text(admin.get(detail(job.id)))
    assert 'class="jq-action-retry_jobs"' in page and 'class="jq-action-cancel_jobs"' in page
    assert 'class="jq-action-run_jobs_now"' not in page
    response = admin.post(
        JOBS,
        {
            "action": "retry_jobs",
            "_selected_action": str(job.id),
            "index": "0",
            "post": "yes",
            "next": detail(job.id),
        },
    )
    assert response.status_code == 302 and response["Location"] == detail(job.id)
    assert state(job.id) == JobState.READY
    assert 'class="jq-action-cancel_jobs"' in text(admin.get(detail(job.id)))
    # An outside "next" is ignored: back to the list.
    response = admin.post(
        JOBS,
        {
            "action": "cancel_jobs",
            "_selected_action": str(job.id),
            "index": "0",
            "post": "yes",
            "next": "https://evil.example/",
        },
    )
    assert response["Location"] == JOBS
    assert state(job.id) == JobState.CANCELLED


def test_actions_need_post_with_a_csrf_token(admin_user):
    job = make_job(JobState.DEAD)
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(admin_user)
    response = strict.post(
        JOBS, {"action": "retry_jobs", "_selected_action": str(job.id), "index": "0", "post": "yes"}
    )
    assert response.status_code == 403
    strict.get(JOBS, {"action": "retry_jobs", "_selected_action": str(job.id), "post": "yes"})
    assert state(job.id) == JobState.DEAD


# -- permissions -----------------------------------------------------------------------------


def test_a_read_only_user_sees_everything_and_no_action(viewer):
    job = make_job(JobState.DEAD)
    for url in (JOBS, DEAD, DASHBOARD, detail(job.id), detail(job.id, "deadletter")):
        response = viewer.get(url)
        assert response.status_code == 200, url
        page = text(response)
        assert 'name="action"' not in page, url
        assert "jq-action-" not in page, url
    assert 'name="_selected_action"' not in text(viewer.get(JOBS))
    # Posting an action anyway does nothing.
    confirm(viewer, JOBS, "retry_jobs", [job.id])
    act(viewer, JOBS, "cancel_jobs", [job.id])
    assert state(job.id) == JobState.DEAD


@pytest.mark.parametrize(
    ("perms", "allowed", "refused"),
    [
        (("view_job", "retry_job"), {"retry_jobs", "run_jobs_now"}, {"cancel_jobs"}),
        (("view_job", "cancel_job"), {"cancel_jobs"}, {"retry_jobs", "run_jobs_now"}),
    ],
)
def test_each_action_needs_its_own_permission(perms, allowed, refused):
    client = client_for(user_with(*perms))
    page = text(client.get(JOBS))
    for name in allowed:
        assert f'value="{name}"' in page
    for name in refused:
        assert f'value="{name}"' not in page
    dead = make_job(JobState.DEAD).id
    scheduled = make_job(JobState.SCHEDULED).id
    for name in refused:
        response = confirm(client, JOBS, name, [dead, scheduled])
        assert "No action selected." in messages_of(response)
    assert (state(dead), state(scheduled)) == ("dead", "scheduled")


def test_without_view_permission_nothing_is_shown():
    client = client_for(user_with(username="staff-only"))
    for url in (JOBS, DEAD, DASHBOARD, WORKERS):
        assert client.get(url).status_code == 403, url
    anonymous = Client()
    assert anonymous.get(DASHBOARD).status_code == 302  # to the login page


# -- dashboard -------------------------------------------------------------------------------


def cell(page: str, queue: str, state_name: str) -> str:
    row = re.search(rf'<tr data-queue="{re.escape(queue)}">(.*?)</tr>', page)
    assert row, f"no row for queue {queue!r}"
    found = re.search(rf'data-state="{state_name}">(?:<a [^>]*>)?(.*?)(?:</a>)?</td>', row[1])
    return re.sub(r"<[^>]+>", "", found[1]).strip()


def test_dashboard_counts_lag_throughput_dead_letters_and_workers(admin):
    now = timezone.now()
    make_jobs(3, JobState.READY, queue="emails", run_at=now - timedelta(seconds=90))
    make_jobs(2, JobState.SCHEDULED, queue="emails", run_at=now + timedelta(hours=1))
    make_jobs(1, JobState.LEASED, queue="emails")
    make_jobs(4, JobState.SUCCEEDED, queue="emails", finished_at=now - timedelta(minutes=2))
    make_jobs(5, JobState.SUCCEEDED, queue="emails", finished_at=now - timedelta(minutes=30))
    make_jobs(6, JobState.SUCCEEDED, queue="emails", finished_at=now - timedelta(days=2))
    make_jobs(2, JobState.DEAD, queue="reports", type="shop.jobs.report")
    make_jobs(
        1,
        JobState.DEAD,
        queue="reports",
        type="shop.jobs.export",
        finished_at=now - timedelta(days=1),
    )
    make_jobs(1, JobState.CANCELLED, queue="reports")
    make_jobs(2, JobState.WAITING, queue="reports")  # waiting for parent jobs (after=[...])
    Worker.objects.create(
        worker_id="w1", host="web-1", pid=11, concurrency=8, queues=["emails"], running_jobs=1
    )
    Worker.objects.create(
        worker_id="w2",
        host="web-2",
        pid=12,
        concurrency=8,
        queues=["reports"],
        last_seen_at=now - timedelta(hours=2),
    )
    response = admin.get(DASHBOARD)
    assert response.status_code == 200
    page = text(response)
    assert [
        cell(page, "emails", s) for s in ("ready", "scheduled", "leased", "succeeded", "dead")
    ] == [
        "3",
        "2",
        "1",
        "15",
        "0",
    ]
    assert [cell(page, "reports", s) for s in ("dead", "cancelled", "waiting")] == ["3", "1", "2"]
    assert cell(page, "emails", "waiting") == "0"
    emails = re.search(r'<tr data-queue="emails">(.*?)</tr>', page)[1]
    assert re.search(r'jq-lag">1 min<', emails)  # the oldest ready job waited 90 s
    assert "4 / 9" in emails  # succeeded in the last 5 min / hour
    reports = re.search(r'<tr data-queue="reports">(.*?)</tr>', page)[1]
    assert "2 / 2" in reports  # dead in the last 5 min / hour
    # The type wraps after its dots only (a <wbr> after each).
    assert 'shop.<wbr>jobs.<wbr>report</a></td><td>reports</td><td class="jq-num">2' in page
    assert "Workers (1 alive of 2)" in page
    assert "web-1" in page and "web-2" in page
    assert "No cron entries." in page
    # The figures refresh in place every 5 s (no reload of the page), or not at all.
    assert '<meta http-equiv="refresh"' not in page
    assert 'data-refresh-seconds="5"' in page
    assert 'data-refresh-seconds="0"' in admin.get(DASHBOARD, {"refresh": "0"}).content.decode()
    # Links lead to the lists, filtered.
    assert f"{JOBS}?queue=emails&amp;state=ready" in page
    assert f"{DEAD}?type=shop.jobs.report&amp;queue=reports" in page


def test_dashboard_is_linked_from_the_app_index_and_the_lists(viewer):
    app = text(viewer.get(reverse("admin:app_list", args=["jobqueue"])))
    assert f'href="{DASHBOARD}"' in app
    assert f'href="{DASHBOARD}"' in text(viewer.get(JOBS))


def test_dashboard_reads_a_handful_of_aggregates(admin, no_declared_limits):
    make_jobs(20, JobState.READY)
    make_jobs(20, JobState.SUCCEEDED)
    with CaptureQueriesContext(connection) as queries:
        admin.get(DASHBOARD)
    job_queries = [q["sql"] for q in queries if "jobqueue_job" in q["sql"]]
    # On PostgreSQL the planner is also asked how big the succeeded and cancelled sets are.
    reads = [sql for sql in job_queries if not sql.startswith("EXPLAIN")]
    # Six, plus the running jobs per concurrency key (issue 18: one read of leased rows), plus
    # the waiting jobs per queue (their own partial index).
    assert len(reads) <= 8, reads
    assert all("GROUP BY" in sql.upper() for sql in reads), reads
    assert len(job_queries) - len(reads) <= 2


# -- big tables (PostgreSQL) -----------------------------------------------------------------


@requires_postgres()
def test_big_lists_use_the_planners_estimate_instead_of_counting(admin, monkeypatch):
    monkeypatch.setattr(paginator_module, "EXACT_COUNT_BELOW", 100)
    from jobqueue.admin import dashboard

    monkeypatch.setattr(dashboard, "EXACT_COUNT_BELOW", 100)
    make_jobs(400, JobState.SUCCEEDED)
    make_jobs(10, JobState.READY)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE jobqueue_job")
    with CaptureQueriesContext(connection) as queries:
        response = admin.get(JOBS)
    page = text(response)
    assert "PostgreSQL's estimate" in page
    assert not any("COUNT(" in q["sql"].upper() for q in queries), [q["sql"] for q in queries]
    assert response.context["cl"].paginator.estimated
    # Pages past the estimated end are empty, not an error.
    assert admin.get(JOBS, {"p": "500"}).status_code == 200
    # A small filtered result is counted exactly.
    response = admin.get(JOBS, {"state": "ready"})
    assert not response.context["cl"].paginator.estimated
    assert response.context["cl"].result_count == 10
    dashboard_page = text(admin.get(DASHBOARD))
    assert re.search(r'data-state="succeeded">.*?≈', dashboard_page)
    assert cell(dashboard_page, "default", "ready") == "10"


def test_small_lists_count_exactly(admin):
    make_jobs(3, JobState.READY)
    response = admin.get(JOBS)
    assert response.context["cl"].result_count == 3
    assert not response.context["cl"].paginator.estimated
    assert "PostgreSQL's estimate" not in text(response)


@pytest.mark.parametrize(
    ("url", "term"),
    [
        (JOBS, "9223372036854775808"),  # bigint's largest + 1
        (JOBS, "#99999999999999999999999"),
        (DEAD, "99999999999999999999999"),
    ],
)
def test_a_search_no_row_can_match_shows_an_empty_list(admin, url, term):
    """Django knows an id over bigint matches nothing and sends no query; the page counts 0
    (before: EXPLAIN of that empty query returned "", and json.loads failed with a 500)."""
    make_jobs(2, JobState.READY)
    make_jobs(2, JobState.DEAD)
    response = admin.get(url, {"q": term})
    assert response.status_code == 200
    assert response.context["cl"].result_count == 0
    assert list(response.context["cl"].result_list) == []
    assert not response.context["cl"].paginator.estimated


def test_the_planners_estimate_of_an_empty_queryset_is_0():
    expected = 0 if connection.vendor == "postgresql" else None  # None: no planner to ask
    make_jobs(2, JobState.READY)
    assert paginator_module.planner_rows(Job.objects.none()) == expected
    assert paginator_module.planner_rows(Job.objects.filter(id__in=[])) == expected
    assert paginator_module.planner_rows(Job.objects.filter(id=2**63)) == expected


def test_rendered_json_is_valid_for_unicode_and_nesting(admin):
    job = make_job(payload={"name": "Zoë", "list": list(range(150))})
    page = admin.get(detail(job.id)).content.decode()
    assert "Zoë" in page and "… 50 more items" in page
    url = reverse("admin:jobqueue_job_json", args=[job.id, "payload"])
    assert json.loads(admin.get(url).content)["list"] == list(range(150))


def test_field_case_24_retry_from_the_admin_grants_a_fresh_budget(admin):
    """FIELD-CASES 24 through the dead-letter page: a retried job that fails once more is
    retried automatically (not straight back to dead), then succeeds with attempts == 2."""
    job_id = jobqueue.enqueue("q24", "tests.testapp.jobs.noop", max_attempts=3)
    for _ in range(3):
        [claimed] = jobqueue.claim("q24", "w", 1)
        past = timezone.now() - timedelta(minutes=5)  # due on either store's clock
        jobqueue.nack(claimed.id, claimed.lease_token, "boom", retry_at=past)
    assert state(job_id) == JobState.DEAD
    assert act(admin, DEAD, "retry_jobs", [job_id]).status_code == 200  # confirmation page
    assert messages_of(confirm(admin, DEAD, "retry_jobs", [job_id])) == ["Retried 1 job."]
    row = Job.objects.get(id=job_id)
    assert (row.state, row.attempts, row.finished_at, row.lease_token) == ("ready", 0, None, None)
    assert [e["kind"] for e in row.errors] == ["error"] * 3 + ["operator_retry"]
    [claimed] = jobqueue.claim("q24", "w", 1)
    assert jobqueue.nack(claimed.id, claimed.lease_token, "once more") == JobState.SCHEDULED
    Job.objects.filter(id=job_id).update(run_at=timezone.now() - timedelta(minutes=5))
    [claimed] = jobqueue.claim("q24", "w", 1)
    jobqueue.ack(claimed.id, claimed.lease_token, "ok")
    row = Job.objects.get(id=job_id)
    assert (row.state, row.attempts, row.result) == (JobState.SUCCEEDED, 2, "ok")
    assert row.finished_at is not None
    # A second retry of the now succeeded job is refused and reported.
    response = confirm(admin, JOBS, "retry_jobs", [job_id])
    assert messages_of(response)[-1] == (
        f"Skipped 1 job that is not dead or cancelled (now: #{job_id} is succeeded)."
    )
