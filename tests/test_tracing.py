"""OpenTelemetry traces from a request into its job (``jobqueue/tracing.py``).

The test process runs opentelemetry-sdk with its in-memory exporter (``tests/otel.py``); a worker
process started by a test runs the SDK too and writes its spans to a file the test reads. A view's
span, the enqueue's producer span and the run's consumer span must form one trace, parent to
child, across the two processes.
"""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest
from django.http import HttpRequest, JsonResponse
from django.test import override_settings
from django.urls import path
from opentelemetry import trace
from opentelemetry.trace import SpanKind, StatusCode

import jobqueue
from jobqueue.cron.firing import run_now
from jobqueue.models import Job
from jobqueue.states import JobState
from jobqueue.worker.loop import Worker
from tests.conftest import FAST_WORKER_SETTINGS, ROOT, requires_postgres
from tests.otel import in_memory, read_spans

pytestmark = pytest.mark.django_db(databases=["default", "sqlite"], transaction=True)

NOOP = "tests.testapp.jobs.noop"
FAIL = "tests.testapp.jobs.fail"


def signup(request: HttpRequest) -> JsonResponse:
    """A view as Django's instrumentation would trace it: its span around the enqueue."""
    with trace.get_tracer("tests").start_as_current_span("POST /signup", kind=SpanKind.SERVER):
        job_id = jobqueue.enqueue(request.GET["queue"], NOOP, {"who": "ann"}, tenant_id="acme")
    return JsonResponse({"job": job_id})


urlpatterns = [path("signup/", signup)]


def hexid(value: int, width: int) -> str:
    return f"0x{value:0{width}x}"


@requires_postgres()
def test_a_views_span_the_enqueue_span_and_the_run_span_form_one_trace(
    client, workers, monkeypatch, tmp_path
):
    spans = in_memory()
    spans.clear()
    q = f"tr-{uuid.uuid4().hex[:6]}"
    with override_settings(ROOT_URLCONF="tests.test_tracing"):
        job_id = client.get("/signup/", {"queue": q}).json()["job"]
    view, enqueue = (
        next(s for s in spans.get_finished_spans() if s.name == name)
        for name in ("POST /signup", f"send {q}")
    )
    # The enqueue is the view's child, and the row keeps its context.
    assert enqueue.parent.span_id == view.context.span_id
    assert enqueue.kind == SpanKind.PRODUCER
    assert enqueue.attributes["messaging.system"] == "jobqueue"
    assert enqueue.attributes["messaging.destination.name"] == q
    assert enqueue.attributes["messaging.message.id"] == str(job_id)
    stored = Job.objects.get(id=job_id).trace
    trace_hex = f"{view.context.trace_id:032x}"
    assert list(stored) == ["traceparent"]  # no tracestate was set
    version, trace_id, parent_id, flags = stored["traceparent"].split("-")
    assert (version, trace_id, parent_id) == ("00", trace_hex, f"{enqueue.context.span_id:016x}")
    assert int(flags, 16) & 1  # sampled

    # The worker's SDK writes its spans to this file (tests/settings.py).
    out = tmp_path / "worker-spans.jsonl"
    monkeypatch.setenv("JOBQUEUE_TEST_OTEL_SPANS", str(out))
    proc = workers.start("--queues", q, "--burst", "--no-scheduler", settings=FAST_WORKER_SETTINGS)
    assert workers.exit_code(proc, timeout=60) == 0
    assert Job.objects.get(id=job_id).state == JobState.SUCCEEDED
    [run] = [s for s in read_spans(out) if s["name"] == f"process {q}"]
    # One trace across the processes: the run's parent is the enqueue.
    assert run["context"]["trace_id"] == hexid(view.context.trace_id, 32)
    assert run["parent_id"] == hexid(enqueue.context.span_id, 16)
    assert run["kind"] == "SpanKind.CONSUMER"
    assert run["status"]["status_code"] == "OK"
    assert run["attributes"] == {
        "messaging.system": "jobqueue",
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "messaging.destination.name": q,
        "messaging.message.id": str(job_id),
        "jobqueue.job.type": NOOP,
        "jobqueue.job.attempt": 1,
        "jobqueue.tenant": "acme",
        "jobqueue.outcome": "succeeded",
    }


@pytest.mark.parametrize("using", ["default", "sqlite"])
def test_each_run_of_a_retried_job_is_a_child_of_its_enqueue_with_its_outcome(using):
    spans = in_memory()
    spans.clear()
    q = f"tr-{uuid.uuid4().hex[:6]}"
    backoff = {"BACKOFF": {"policy": "none", "base_seconds": 0.001, "cap_seconds": 0.001}}
    with override_settings(JOBQUEUE=backoff):
        [job_id] = jobqueue.enqueue_many(
            [{"queue": q, "job_type": FAIL, "payload": {}, "max_attempts": 2}], using=using
        )
        w = Worker(queues=[q], using=using, install_signal_handlers=False, listen_notify=False)
        while Job.objects.using(using).get(id=job_id).state != JobState.DEAD:
            w.run_once()
    [enqueue] = [s for s in spans.get_finished_spans() if s.name == f"send {q}"]
    runs = [s for s in spans.get_finished_spans() if s.name == f"process {q}"]
    assert [r.attributes["jobqueue.job.attempt"] for r in runs] == [1, 2]
    assert {r.context.trace_id for r in runs} == {enqueue.context.trace_id}
    assert {r.parent.span_id for r in runs} == {enqueue.context.span_id}
    assert [r.attributes["jobqueue.outcome"] for r in runs] == ["scheduled", "dead"]
    assert [r.status.status_code for r in runs] == [StatusCode.ERROR] * 2
    assert runs[-1].status.description == "ConnectionError: boom"


def test_a_cron_fire_is_a_producer_span_whose_context_the_job_keeps():
    spans = in_memory()
    spans.clear()
    name = f"tr-{uuid.uuid4().hex[:6]}"
    jobqueue.schedule(name, "0 3 * * *", "nightly", NOOP, {})
    job_id = run_now(name)
    [fire] = [s for s in spans.get_finished_spans() if s.name == "fire nightly"]
    assert fire.kind == SpanKind.PRODUCER
    assert fire.attributes["messaging.message.id"] == str(job_id)
    assert Job.objects.get(id=job_id).trace["traceparent"].split("-")[2] == (
        f"{fire.context.span_id:016x}"
    )


def test_without_opentelemetry_nothing_is_imported_and_nothing_is_stored():
    """In a process where opentelemetry cannot be imported, the spans are no-ops."""
    code = (
        "import sys; sys.modules['opentelemetry'] = None\n"
        "from jobqueue import tracing\n"
        "assert not tracing.enabled()\n"
        "with tracing.producer_span(['q'], 't') as span:\n"
        "    span.sent([1])\n"
        "assert span.trace_json is None\n"
        "with tracing.run_span(job_id=1, job_type='t', queue='q', attempt=1, tenant_id='',"
        " trace={'traceparent': '00-' + '1' * 32 + '-' + '2' * 16 + '-01'}) as run:\n"
        "    run.ended('dead', {'type': 'E', 'message': 'm'})\n"
        "assert not any(m.startswith('opentelemetry') for m in sys.modules if sys.modules[m])\n"
        "print('ok')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.stdout.strip() == "ok", done.stderr
