"""Issue 31 item 4 and issue 32 item 6: every output masks secrets and escapes control characters.

One masking function (``jobqueue.masking``) behind every output that shows a payload, a result,
an error or a batch payload: ``manage.py jobqueue show`` and ``jobs`` (text and JSON), the error
history as the executor records it, the worker's log lines (plain and JSON formatters), the
admin's batch page, and the metrics' label values. Terminal escape sequences in an error message
(``ESC]0;...BEL`` retitles the terminal, ``ESC[2J`` clears it) reach none of them raw.
"""

from __future__ import annotations

import json
import logging

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse

import jobqueue
from jobqueue.logging import JSONFormatter, PlainFormatter
from jobqueue.masking import MASK, escape_control, safe_text
from jobqueue.models import Batch, Job
from jobqueue.states import JobState
from jobqueue.worker.loop import Worker
from tests.factories import make_job
from tests.jobqueue_cli import cli

pytestmark = pytest.mark.django_db(transaction=True)

TOKEN = "sk_live_abc123"
BATCH_SECRET = "batchsecret-Q7v"
ESCAPES = "\x1b]0;owned\x07\x1b[2J\r"
ERRORS = [
    {
        "attempt": 1,
        "at": "2026-12-06T00:00:00+00:00",
        "kind": "error",
        "worker": "w1",
        "type": "ValueError",
        "message": f"call failed: token={TOKEN} {ESCAPES}done",
        "traceback": f"Traceback\n  login({TOKEN!r})\nValueError: {ESCAPES}",
    }
]


def raw_escapes(text: str) -> list[str]:
    return [c for c in ("\x1b", "\x07", "\r") if c in text]


@pytest.fixture
def dead_job() -> Job:
    return make_job(
        JobState.DEAD,
        payload={"user": "bob", "api_token": TOKEN},
        result=None,
        errors=ERRORS,
    )


def test_escape_control_writes_escapes_and_keeps_layout():
    assert escape_control("a\x1b[2Jb\x07c\rd\te\nf") == "a\\x1b[2Jb\\x07c\\rd\te\nf"
    assert escape_control("x\ny", one_line=True) == "x\\ny"
    assert escape_control("\x9b31m\u202e") == "\\x9b31m\\u202e"
    assert safe_text(f"token={TOKEN} \x1b") == f"token={MASK} \\x1b"


def test_show_text_masks_the_payload_and_history_and_escapes_the_terminal(dead_job):
    done = cli("show", str(dead_job.id))
    assert done.returncode == 0, done.stderr
    assert TOKEN not in done.stdout
    assert raw_escapes(done.stdout) == []
    assert MASK in done.stdout and "bob" in done.stdout
    assert "\\x1b]0;owned\\x07" in done.stdout  # shown, harmless


def test_show_and_jobs_json_mask_every_value(dead_job):
    shown = cli("show", str(dead_job.id), "--json")
    assert shown.returncode == 0, shown.stderr
    assert TOKEN not in shown.stdout
    row = shown.json()
    assert row["payload"] == {"user": "bob", "api_token": MASK}
    assert MASK in row["errors"][0]["message"] and MASK in row["errors"][0]["traceback"]
    listed = cli("jobs", "--json")
    assert listed.returncode == 0, listed.stderr
    assert TOKEN not in listed.stdout and MASK in listed.json()[0]["last_error"]


def test_jobs_text_masks_and_escapes_the_last_error(dead_job):
    listed = cli("jobs")
    assert listed.returncode == 0, listed.stderr
    assert TOKEN not in listed.stdout
    assert raw_escapes(listed.stdout) == []


def test_a_failure_echoing_a_payload_secret_is_recorded_masked_and_logged_masked(caplog):
    secret = "pw-Zr81-kept-out"
    job_id = jobqueue.enqueue(
        "w",
        "tests.testapp.jobs.fail_echoing",
        {"api_token": secret, "note": ESCAPES},
        max_attempts=1,
    )
    worker = Worker(queues=["w"], install_signal_handlers=False, listen_notify=False)
    with caplog.at_level(logging.INFO, logger="jobqueue"):
        assert worker.run_once() == 1
    job = Job.objects.get(id=job_id)
    assert job.state == JobState.DEAD
    [entry] = job.errors
    assert secret not in json.dumps(entry)
    assert f"login refused for {MASK}" in entry["message"]
    lines = [r for r in caplog.records if getattr(r, "job_id", None) == job_id]
    assert lines
    for record in lines:
        assert secret not in record.getMessage()
        plain = PlainFormatter().format(record)
        assert raw_escapes(plain) == [] and "\n" not in plain
        assert secret not in JSONFormatter().format(record)


def test_log_formatters_mask_key_value_secrets_and_escape_control_characters():
    record = logging.LogRecord(
        "jobqueue.worker", logging.WARNING, __file__, 1, "call: token=%s %s", (TOKEN, ESCAPES), None
    )
    plain = PlainFormatter().format(record)
    assert TOKEN not in plain and f"token={MASK}" in plain
    assert raw_escapes(plain) == []
    as_json = JSONFormatter().format(record)
    assert TOKEN not in as_json and raw_escapes(json.loads(as_json)["message"]) == []


def test_the_batch_page_masks_the_batch_payload_and_callbacks():
    batch = Batch.objects.create(
        payload={"order": 7, "secret": BATCH_SECRET},
        callbacks=[{"type": "x", "payload": {"api_token": BATCH_SECRET}}],
    )
    user = User.objects.create_user("viewer", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_job"))
    client = Client()
    client.force_login(user)
    response = client.get(reverse("admin:jobqueue_batch_change", args=[batch.pk]))
    assert response.status_code == 200
    html = response.content.decode()
    assert BATCH_SECRET not in html
    assert MASK in html


def test_the_job_page_escapes_control_characters(dead_job, admin_client):
    response = admin_client.get(reverse("admin:jobqueue_job_change", args=[dead_job.pk]))
    assert response.status_code == 200
    html = response.content.decode()
    assert raw_escapes(html.replace("\r\n", "\n")) == []
    assert TOKEN not in html


def test_a_custom_consumers_nack_is_recorded_masked():
    job_id = jobqueue.enqueue("custom", "tests.testapp.jobs.noop", {})
    [held] = jobqueue.claim("custom", "consumer-1", 1)
    jobqueue.nack(held.id, held.lease_token, f"upstream said: token={TOKEN} {ESCAPES}")
    [entry] = Job.objects.get(id=job_id).errors
    assert TOKEN not in entry["message"] and f"token={MASK}" in entry["message"]


def test_every_admin_page_escapes_control_characters_in_any_field(admin_client):
    """A job type may hold ESC, a tenant a bidi override: no page carries them raw."""
    odd_type = "evil\x1b]0;owned\x07.job"
    job = make_job(JobState.DEAD, type=odd_type, tenant_id="acme\u202egnp.exe", errors=ERRORS)
    pages = [
        reverse("admin:jobqueue_job_changelist"),
        reverse("admin:jobqueue_job_change", args=[job.pk]),
        reverse("admin:jobqueue_deadletter_changelist"),
        reverse("admin:jobqueue_deadletter_change", args=[job.pk]),
        reverse("admin:jobqueue_dashboard"),
    ]
    for url in pages:
        response = admin_client.get(url)
        assert response.status_code == 200, url
        html = response.content.decode()
        assert raw_escapes(html.replace("\r\n", "\n")) == [], url
        assert "\u202e" not in html, url
    html = admin_client.get(reverse("admin:jobqueue_job_change", args=[job.pk])).content.decode()
    assert "evil\\x1b]0;owned\\x07.job" in html
