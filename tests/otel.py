"""OpenTelemetry's SDK for the tracing tests: in memory in the test process, a file in a worker's.

The global tracer provider can be set once per process, so :func:`in_memory` sets it at most
once (one exporter per process, cleared by each test that reads it).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from pathlib import Path

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

_lock = threading.Lock()
_memory: InMemorySpanExporter | None = None


def in_memory() -> InMemorySpanExporter:
    """Return this process's in-memory exporter, installing the SDK with it the first time."""
    global _memory
    with _lock:
        if _memory is None:
            _memory = InMemorySpanExporter()
            provider = TracerProvider()
            provider.add_span_processor(SimpleSpanProcessor(_memory))
            trace.set_tracer_provider(provider)
        return _memory


class JsonLinesExporter(SpanExporter):
    """Append each span to a file as one JSON line (``ReadableSpan.to_json``)."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self.path.open("a") as f:
            for span in spans:
                f.write(json.dumps(json.loads(span.to_json())) + "\n")
        return SpanExportResult.SUCCESS


def export_spans_to(path: str) -> None:
    """Install the SDK in this (worker) process, writing ended spans to ``path``."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(JsonLinesExporter(path)))
    trace.set_tracer_provider(provider)


def read_spans(path: Path) -> list[dict]:
    """Return the spans a worker wrote to ``path`` (none if it wrote none)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
