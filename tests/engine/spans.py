"""An in-memory span exporter on the global tracer provider, installed once per process.

OpenTelemetry allows one global provider per process, so every tracing test shares it
and clears the exporter first (the `spans` fixture).
"""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

_EXPORTER: InMemorySpanExporter | None = None


def exporter() -> InMemorySpanExporter:
    """The exporter behind the global provider (installing both the first time)."""
    global _EXPORTER
    if _EXPORTER is None:
        _EXPORTER = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        trace.set_tracer_provider(provider)
    return _EXPORTER


class Spans:
    """The finished spans, and ways to look at them."""

    def __init__(self, memory: InMemorySpanExporter) -> None:
        self.memory = memory

    def all(self) -> Sequence[ReadableSpan]:
        return self.memory.get_finished_spans()

    def named(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.all() if s.name == name]

    def one(self, name: str) -> ReadableSpan:
        found = self.named(name)
        assert len(found) == 1, [s.name for s in self.all()]
        return found[0]

    def children(self, parent: ReadableSpan) -> list[ReadableSpan]:
        assert parent.context is not None
        return [
            s
            for s in self.all()
            if s.parent is not None and s.parent.span_id == parent.context.span_id
        ]
