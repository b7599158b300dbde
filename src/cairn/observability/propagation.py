"""The trace context a run is started in: taken where it starts, stored with the run.

Stored as JSON text of the W3C headers (`traceparent`, `tracestate`) that the global
OpenTelemetry propagator writes; the spans of every attempt of the run continue that
trace (`tracing.py`). Without opentelemetry installed and in use, nothing is stored.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.context import Context


def current() -> str | None:
    """The active trace context as stored with a run; None when there is none."""
    # No span can be active in a process that never imported opentelemetry's context:
    # then starting a run costs a dict lookup, and opentelemetry is never imported here.
    if "opentelemetry.context" not in sys.modules:
        return None
    from opentelemetry import propagate

    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return json.dumps(carrier, sort_keys=True) if carrier else None


def extract(stored: str | None) -> Context | None:
    """The context a run's stored trace context describes (opentelemetry must be installed)."""
    if not stored:
        return None
    try:
        carrier: Any = json.loads(stored)
    except ValueError:
        return None
    if not isinstance(carrier, dict):
        return None
    from opentelemetry import propagate

    return propagate.extract({str(k): str(v) for k, v in carrier.items()})
