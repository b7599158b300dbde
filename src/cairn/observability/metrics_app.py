"""`metrics_app`: an engine's Prometheus metrics as an ASGI app (to mount at `/metrics`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from cairn.observability.metrics import Metrics, load_prometheus

Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


def metrics_app(metrics: Metrics) -> Callable[[MutableMapping[str, Any], Receive, Send], Any]:
    """An ASGI app serving `metrics` in Prometheus' text format, to mount at `/metrics`.

    It reads the gauges' counts asynchronously before rendering, so it may run on the
    engine's own event loop (inside the dashboard, say) or on another.

    Args:
        metrics: The engine's metrics (`engine.metrics`).

    Returns:
        An ASGI application answering every HTTP request with the current metrics.
    """
    exposition = load_prometheus().exposition

    async def app(scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        await metrics.counts()
        accept = ""
        for name, value in scope.get("headers", ()):
            if name.lower() == b"accept":
                accept = value.decode("latin-1")
        encoder, content_type = exposition.choose_encoder(accept)
        body = encoder(metrics.registry)
        headers = [(b"content-type", content_type.encode("latin-1"))]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return app
