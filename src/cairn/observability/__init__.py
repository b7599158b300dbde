"""Observability: run context on log records, JSON logs, Prometheus metrics, OpenTelemetry.

Importing this package imports neither prometheus_client nor opentelemetry: each is
imported when first used (extras `cairn-workflows[metrics]` and `cairn-workflows[otel]`).
It sits below `core/`: it imports the foundation, the store's records and protocol and
`authoring.context` only; the core and runtime call it through the hooks in `hooks.py`.
"""

from __future__ import annotations

from cairn.observability.jsonlog import JsonFormatter
from cairn.observability.logcontext import RunContextFilter
from cairn.observability.metrics import Metrics
from cairn.observability.metrics_app import metrics_app
from cairn.observability.tracing import Tracing

__all__ = ["JsonFormatter", "Metrics", "RunContextFilter", "Tracing", "metrics_app"]
