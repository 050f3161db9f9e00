"""FIELD-CASES 34: admin bulk actions on a mixed selection and on "select all N", with Django's
test client (sized down: 200 T2 dead jobs instead of 1,000). No worker runs; the reaper is
called where a step needs it.
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission, User
from django.forms.models import model_to_dict
from django.test import Client
from django.urls import reverse
from django.utils import timezone

import jobqueue
from jobqueue.models import Job
from jobqueue.states import JobState
from jobqueue.store import get_store
from jobqueue.store.interface import ReapDecision
from tests.factories import make_job, make_jobs

pytestmark = pytest.mark.django_db

JOBS = reverse("admin:jobqueue_job_changelist")
STATES = ("dead", "ready", "leased", "succeeded", "scheduled")
T2_DEAD = 200


def client_for(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def staff_with_cancel_only() -> Client:
    user = User.objects.create_user("cancel-only", is_staff=True)
    for codename in ("view_job", "cancel_job"):
        user.user_permissions.add(Permission.objects.get(codename=codename))
    return client_for(user)


def messages_of(response) -> list[str]:
    """Return the messages an action left, and mark them shown (as the next page would)."""
    return [str(m) for m in response.context["messages"]]


def t1_jobs() -> dict[str, list[int]]:
    return {s: [make_job(s, tenant_id="T1").id for _ in range(5)] for s in STATES}


def snapshot(ids) -> dict[int, dict]:
    return {job.id: model_to_dict(job) for job in Job.objects.filter(id__in=list(ids))}


def post(client: Client, url: str, action: str, ids, **extra):
    data = {"action": action, "index": "0", "_selected_action": [str(i) for i in ids], **extra}
    return client.post(url, data, follow=True)


def confirmation_form(page: str) -> dict:
    """Return the hidden fields of a confirmation page's form, as the browser would post them."""
    form = page[page.index('<form method="post"') :]
    form = form[: form.index("</form>")]
    data: dict[str, list[str]] = {}
    for name, value in re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', form):
        data.setdefault(name, []).append(value)
    data.pop("csrfmiddlewaretoken", None)
    return data


def operator_retries(job_id: int) -> int:
    errors = Job.objects.get(id=job_id).errors or []
    return sum(entry.get("kind") == "operator_retry" for entry in errors)


def test_step_1_retry_of_a_mixed_selection_reports_done_and_skipped_by_state(admin_user):
    jobs = t1_jobs()
    everything = [i for ids in jobs.values() for i in ids]
    others = [i for s, ids in jobs.items() if s != "dead" for i in ids]
    before = snapshot(others)
    client = client_for(admin_user)
    page = post(client, JOBS, "retry_jobs", everything).content.decode()
    assert "retry 5 jobs" in page
    response = client.post(JOBS, confirmation_form(page), follow=True)
    assert response.redirect_chain[-1][1] == 302
    assert messages_of(response)[0] == "Retried 5 jobs."
    skipped = messages_of(response)[1]
    assert skipped.startswith(
        "Skipped 20 jobs that are not dead or cancelled "
        "(5 leased, 5 ready, 5 scheduled, 5 succeeded; now: "
    )
    for job_id in jobs["dead"]:
        row = Job.objects.get(id=job_id)
        assert (row.state, row.attempts) == ("ready", 0)
        assert operator_retries(job_id) == 1
    assert snapshot(others) == before  # every other column of the 20 unchanged


def test_step_2_cancel_of_a_mixed_selection_and_the_reaper_ends_the_running_ones(admin_user):
    jobs = t1_jobs()
    everything = [i for ids in jobs.values() for i in ids]
    done_before = snapshot(jobs["succeeded"])
    client = client_for(admin_user)
    page = post(client, JOBS, "cancel_jobs", everything).content.decode()
    response = client.post(JOBS, confirmation_form(page), follow=True)
    said = messages_of(response)
    assert said[0] == "Cancelled 15 jobs."
    assert said[1].startswith("Asked 5 running jobs to cancel")
    assert said[2].startswith("Skipped 5 jobs that are already finished (5 succeeded; now: ")
    for s in ("ready", "scheduled", "dead"):
        assert {Job.objects.get(id=i).state for i in jobs[s]} == {"cancelled"}
    leased = Job.objects.filter(id__in=jobs["leased"])
    assert {j.state for j in leased} == {"leased"}
    assert all(j.cancel_requested_at is not None for j in leased)
    assert snapshot(jobs["succeeded"]) == done_before
    # Their leases run out; the reaper ends them cancelled, not scheduled.
    later = timezone.now() + timedelta(hours=1)
    get_store().reap(
        lambda lease: ReapDecision(
            id=lease.id, lease_token=lease.lease_token, dead=False, delay_s=1.0
        ),
        now=later,
    )
    assert {j.state for j in Job.objects.filter(id__in=jobs["leased"])} == {"cancelled"}


def test_steps_3_and_4_select_all_across_pages_confirms_n_then_a_double_submit_changes_nothing(
    admin_user,
):
    t1 = t1_jobs()
    t1_before = snapshot([i for ids in t1.values() for i in ids])
    t2 = [j.id for j in make_jobs(T2_DEAD, JobState.DEAD, tenant_id="T2", queue="t2")]
    url = f"{JOBS}?state=dead&tenant=T2"
    client = client_for(admin_user)
    listing = client.get(url)
    assert listing.status_code == 200
    page_ids = t2[-50:]  # the boxes on the first page
    page = post(client, url, "retry_jobs", page_ids, select_across="1").content.decode()
    assert f"retry {T2_DEAD} jobs</strong> (every job matching" in page
    assert {Job.objects.get(id=i).state for i in t2} == {"dead"}  # nothing changed yet
    form = confirmation_form(page)
    # Variant: one of them is retried through the API and claimed before the submit.
    raced = t2[7]
    jobqueue.retry(raced)
    [claimed] = get_store().claim(["t2"], "w1", 1, 30.0)
    assert claimed.id == raced
    response = client.post(url, form, follow=True)
    assert messages_of(response) == [
        f"Retried {T2_DEAD - 1} jobs.",
        f"Skipped 1 job that changed since the page loaded (now: #{raced} is leased).",
    ]
    assert Job.objects.filter(id__in=t2, state=JobState.READY).count() == T2_DEAD - 1
    assert operator_retries(raced) == 1  # one "retried by operator" entry, not two
    assert snapshot(t1_before) == t1_before
    attempts_after_first = dict(Job.objects.filter(id__in=t2).values_list("id", "attempts"))
    # Step 4: the same confirmed form again, as a double click would send it.
    response = client.post(url, form, follow=True)
    said = messages_of(response)
    assert said[0] == "Retried 0 jobs."
    assert said[1].startswith(
        f"Skipped {T2_DEAD} jobs that changed since the page loaded (1 leased, "
        f"{T2_DEAD - 1} ready; now: "
    )
    assert all(operator_retries(i) == 1 for i in t2)
    assert dict(Job.objects.filter(id__in=t2).values_list("id", "attempts")) == (
        attempts_after_first
    )


def test_step_3_a_row_matching_the_filter_after_the_confirmation_is_not_acted_on(admin_user):
    t2 = [j.id for j in make_jobs(3, JobState.DEAD, tenant_id="T2")]
    url = f"{JOBS}?state=dead&tenant=T2"
    client = client_for(admin_user)
    page = post(client, url, "retry_jobs", t2, select_across="1").content.decode()
    assert "retry 3 jobs" in page
    late = make_job(JobState.DEAD, tenant_id="T2").id  # arrives after the page showed 3
    response = client.post(url, confirmation_form(page), follow=True)
    assert messages_of(response) == ["Retried 3 jobs."]
    assert Job.objects.get(id=late).state == JobState.DEAD


def test_step_5_staff_without_retry_permission_gets_no_retry_and_a_forged_post_does_nothing():
    jobs = t1_jobs()
    everything = [i for ids in jobs.values() for i in ids]
    before = snapshot(everything)
    client = staff_with_cancel_only()
    listing = client.get(JOBS).content.decode()
    assert 'value="retry_jobs"' not in listing and 'value="cancel_jobs"' in listing
    forged = {"post": "yes", "jq_confirmed_ids": ",".join(map(str, everything))}
    for extra in ({}, {"post": "yes"}, forged):
        response = post(client, JOBS, "retry_jobs", everything, **extra)
        assert not any(m.startswith("Retried") for m in messages_of(response))
    assert snapshot(everything) == before
    page = post(client, JOBS, "cancel_jobs", everything).content.decode()
    response = client.post(JOBS, confirmation_form(page), follow=True)
    assert messages_of(response)[0] == "Cancelled 15 jobs."
