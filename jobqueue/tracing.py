"""OpenTelemetry traces from the enqueue into the run, when ``opentelemetry-api`` is installed.

An enqueue (``enqueue``, ``enqueue_many``, ``@job`` ``.enqueue``, the ``django.tasks`` backend,
a cron fire) runs inside a *producer* span (:func:`producer_span`), and the W3C trace context of
that span (``traceparent``, ``tracestate``) is stored on the job's row (``Job.trace``). Each run
of the job is a *consumer* span (:func:`run_span`) whose parent is that context, so a request's
span, the enqueue's and every run's (a retry is another run of the same trace) form one trace,
across processes. Attributes follow OpenTelemetry's messaging semantic conventions
(``messaging.system``, ``messaging.destination.name`` = the queue, ``messaging.message.id`` = the
job id), plus the attempt and the tenant; the run's outcome is its span's status.

Without ``opentelemetry-api`` nothing of it is imported and every function here is a no-op; with
it but no SDK configured (the API's default, non-recording provider), spans cost a few calls and
no context is stored: an invalid context injects nothing. Configure the SDK as usual
(``opentelemetry-instrument``, or a ``TracerProvider`` set at start-up in both the web and the
worker processes). The propagation is W3C Trace Context's alone, whatever the global propagator
is: the row keeps what the run needs and nothing a baggage header might carry.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

try:  # optional: the "otel" extra
    from opentelemetry import trace as _trace
    from opentelemetry.trace import SpanKind, Status, StatusCode
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError:  # pragma: no cover - exercised where the extra is absent
    _trace = None  # type: ignore[assignment]

__all__ = ["MESSAGING_SYSTEM", "ProducerSpan", "RunSpan", "enabled", "producer_span", "run_span"]

#: ``messaging.system`` of every span.
MESSAGING_SYSTEM = "jobqueue"

#: Outcome state -> whether the run's span status is an error.
_FAILED = frozenset({"scheduled", "dead", "cancelled"})


def enabled() -> bool:
    """Return whether ``opentelemetry-api`` is installed (the spans may still not record)."""
    return _trace is not None


def _tracer() -> Any:
    # get_tracer is cheap, and a tracer taken before the SDK's provider is set is a proxy that
    # follows it once it is.
    return _trace.get_tracer("jobqueue")


class ProducerSpan:
    """The span of one enqueue (or one ``enqueue_many``): what to store, and its job ids.

    Attributes:
        trace_json: the W3C trace context to store on the job rows, as JSON text; None when
            nothing records the span (no SDK) or OpenTelemetry is absent.
    """

    def __init__(self, span: Any = None, trace_json: str | None = None) -> None:
        self._span = span
        self.trace_json = trace_json

    def sent(self, job_ids: list[int]) -> None:
        """Name the jobs the enqueue wrote (``messaging.message.id`` for one job)."""
        if self._span is None or not self._span.is_recording():
            return
        if len(job_ids) == 1:
            self._span.set_attribute("messaging.message.id", str(job_ids[0]))
        else:
            self._span.set_attribute("messaging.batch.message_count", len(job_ids))


_NO_PRODUCER = ProducerSpan()


@contextmanager
def producer_span(
    queues: list[str], job_type: str | None, tenant_id: str = "", *, operation: str = "send"
) -> Iterator[ProducerSpan]:
    """Run an enqueue inside a producer span; yield what to store on its rows.

    Args:
        queues: the queues written to (``messaging.destination.name`` when there is one).
        job_type: the job type, when one (``jobqueue.job.type``).
        tenant_id: the jobs' tenant, if any (``jobqueue.tenant``).
        operation: ``messaging.operation.name``: ``send``, or ``fire`` for a cron fire.

    Yields:
        A :class:`ProducerSpan`; an exception raised inside is recorded on the span (status
        error) and passes through.
    """
    if _trace is None:
        yield _NO_PRODUCER
        return
    destinations = sorted(set(queues))
    name = f"{operation} {destinations[0]}" if len(destinations) == 1 else operation
    attributes: dict[str, Any] = {
        "messaging.system": MESSAGING_SYSTEM,
        "messaging.operation.type": "send",
        "messaging.operation.name": operation,
    }
    if len(destinations) == 1:
        attributes["messaging.destination.name"] = destinations[0]
    if job_type:
        attributes["jobqueue.job.type"] = job_type
    if tenant_id:
        attributes["jobqueue.tenant"] = tenant_id
    with _tracer().start_as_current_span(
        name, kind=SpanKind.PRODUCER, attributes=attributes
    ) as span:
        carrier: dict[str, str] = {}
        TraceContextTextMapPropagator().inject(carrier)
        yield ProducerSpan(span, json.dumps(carrier, sort_keys=True) if carrier else None)


class RunSpan:
    """The span of one run; :meth:`ended` sets its status from the outcome."""

    def __init__(self, span: Any = None) -> None:
        self._span = span

    def ended(self, state: str, error: Mapping[str, Any] | None = None) -> None:
        """Record the run's outcome: ``state`` (succeeded, scheduled, dead, cancelled) and error.

        Args:
            state: the job state the outcome moves it to (``RunOutcome.state``).
            error: the outcome's error-history entry, if any (its ``type`` and ``message``).
        """
        span = self._span
        if span is None or not span.is_recording():
            return
        span.set_attribute("jobqueue.outcome", state)
        if state in _FAILED:
            what = ""
            if error:
                what = f"{error.get('type', '')}: {error.get('message', '')}".strip(": ")
            span.set_status(Status(StatusCode.ERROR, what or state))
        else:
            span.set_status(Status(StatusCode.OK))


_NO_RUN = RunSpan()


@contextmanager
def run_span(
    *,
    job_id: int,
    job_type: str,
    queue: str,
    attempt: int,
    tenant_id: str,
    trace: Mapping[str, str] | None,
) -> Iterator[RunSpan]:
    """Run a job's handler inside a consumer span, child of its enqueue's stored context.

    Args:
        job_id: the job's id (``messaging.message.id``).
        job_type: its type (``jobqueue.job.type``).
        queue: its queue (``messaging.destination.name``).
        attempt: this attempt's number, from 1 (``jobqueue.job.attempt``).
        tenant_id: its tenant, if any (``jobqueue.tenant``).
        trace: the W3C trace context its row stored (``Job.trace``); None: a root span.

    Yields:
        A :class:`RunSpan` to record the outcome on; the span is current while the handler
        runs (its own spans are children), on its thread or in its task.
    """
    if _trace is None:
        yield _NO_RUN
        return
    parent = TraceContextTextMapPropagator().extract(dict(trace)) if trace else None
    attributes: dict[str, Any] = {
        "messaging.system": MESSAGING_SYSTEM,
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "messaging.destination.name": queue,
        "messaging.message.id": str(job_id),
        "jobqueue.job.type": job_type,
        "jobqueue.job.attempt": attempt,
    }
    if tenant_id:
        attributes["jobqueue.tenant"] = tenant_id
    with _tracer().start_as_current_span(
        f"process {queue}",
        context=parent,
        kind=SpanKind.CONSUMER,
        attributes=attributes,
        # The executor turns every exception into an outcome; ended() sets the status.
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        yield RunSpan(span)
