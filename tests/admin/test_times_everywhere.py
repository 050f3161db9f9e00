"""No jobqueue admin page shows a time Django's default way (``Dec. 6, 2026, 8:26 a.m.``: no
seconds, no zone): every list and every object page, through Django's test client, with a row in
each table so that every time column is drawn.
"""

from __future__ import annotations

import re

import pytest
from django.contrib import admin
from django.urls import NoReverseMatch, reverse

import jobqueue
from jobqueue.models import DependencyBreaker, Pause, RetryBudget, Worker
from jobqueue.states import JobState
from tests.factories import error_entry, make_job

pytestmark = pytest.mark.django_db

#: Django's English DATETIME_FORMAT ("N j, Y, P"), and a bare "P" time.
DJANGO_DEFAULT = re.compile(
    r"[A-Z][a-z]{2}\.? \d{1,2}, \d{4}|\d{1,2}(?::\d{2})? [ap]\.m\.|noon|midnight"
)


def test_every_jobqueue_admin_page_shows_times_to_the_second_with_their_zone(admin_client):
    make_job(JobState.DEAD, errors=[error_entry(1)])
    make_job(JobState.LEASED)
    Worker.objects.create(worker_id="w:1:a", host="w", pid=1, queues=["q"], concurrency=1)
    jobqueue.schedule("nightly", "0 3 * * *", "q", "tests.testapp.jobs.noop")
    DependencyBreaker.objects.create(name="stripe", state="open")
    Pause.objects.create(kind="queue", name="q", paused_by="ops")
    RetryBudget.objects.create(queue="q", tokens=3)
    seen, wrong = 0, []
    for model in admin.site._registry:
        if model._meta.app_label != "jobqueue" or model._meta.model_name == "queuedashboard":
            continue
        name = model._meta.model_name
        pages = [reverse(f"admin:jobqueue_{name}_changelist")]
        row = model._default_manager.order_by("pk").first()
        if row is not None:
            try:
                pages.append(reverse(f"admin:jobqueue_{name}_change", args=[row.pk]))
            except NoReverseMatch:
                pass
        for url in pages:
            page = admin_client.get(url).content.decode()
            seen += 1
            wrong += [(url, m) for m in DJANGO_DEFAULT.findall(page)]
    assert seen >= 14
    assert wrong == []
