"""The JSON form of a workflow the catalog knows.

`cairn workflows list --json` prints it; the HTTP API (`/api/v1/workflows`) answers it.
"""

from __future__ import annotations

from typing import Any

from cairn.runtime.catalog import WorkflowInfo


def workflow_dict(info: WorkflowInfo) -> dict[str, Any]:
    """The JSON form of a workflow (also `GET /api/v1/workflows`)."""
    return {
        "name": info.name,
        "queue": info.queue,
        "version": info.version,
        "on": info.on,
        "durable": info.durable,
        "local": info.local,
        "workers": list(info.workers),
    }
