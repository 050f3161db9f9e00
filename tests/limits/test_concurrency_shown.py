"""A job's concurrency key and limit (issue 18) are shown where an operator looks at one job.

The admin's job page (and a filter by key on the list), through Django's test client, and
``manage.py jobqueue show`` run in this process (``call_command``), on PostgreSQL and SQLite.
"""

from __future__ import annotations

import json
import re
from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse

from jobqueue.states import JobState
from tests.factories import make_job

pytestmark = pytest.mark.django_db

JOBS = reverse("admin:jobqueue_job_changelist")


def text(response) -> str:
    assert response.status_code == 200, response.status_code
    return re.sub(r"\s+", " ", response.content.decode())


def ids_on(response) -> set[int]:
    return {int(i) for i in re.findall(r'name="_selected_action" value="(\d+)"', text(response))}


def shown(page: str, field: str) -> str | None:
    """Return the read-only value of ``field`` on an admin detail page (None: not shown)."""
    found = re.search(
        rf'fieldBox field-{field}"> <label[^>]*>.*?<div class="readonly">([^<]*)</div>', page
    )
    return None if found is None else found.group(1)


def test_the_admin_job_page_shows_the_concurrency_key_and_limit(admin_client):
    job = make_job(JobState.READY, concurrency_key="acct:42", concurrency_limit=3)
    page = text(admin_client.get(reverse("admin:jobqueue_job_change", args=[job.id])))
    assert shown(page, "concurrency_key") == "acct:42"
    assert shown(page, "concurrency_limit") == "3"


def test_the_admin_job_list_filters_by_concurrency_key(admin_client):
    mine = make_job(JobState.READY, concurrency_key="acct:42", concurrency_limit=3).id
    make_job(JobState.READY, concurrency_key="acct:7", concurrency_limit=3)
    make_job(JobState.READY)
    response = admin_client.get(JOBS, {"concurrency_key": "acct:42"})
    assert ids_on(response) == {mine}
    assert "By concurrency key" in text(response)


def _show(job_id: int, *args: str) -> str:
    out = StringIO()
    call_command("jobqueue", "show", str(job_id), *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_cli_show_prints_the_concurrency_key_and_limit():
    job = make_job(JobState.LEASED, concurrency_key="acct:42", concurrency_limit=3)
    lines = dict(
        line.split(None, 1) for line in _show(job.id).splitlines() if line.startswith("concurr")
    )
    assert lines == {"concurrency_key": "acct:42", "concurrency_limit": "3"}
    data = json.loads(_show(job.id, "--json"))
    assert (data["concurrency_key"], data["concurrency_limit"]) == ("acct:42", 3)


def test_cli_show_of_an_unlimited_job_says_so_in_json():
    data = json.loads(_show(make_job(JobState.READY).id, "--json"))
    assert (data["concurrency_key"], data["concurrency_limit"]) == (None, None)
