"""Ready steps for what workflows do most: HTTP calls, SQL, industrial tags, waits.

Install with `pip install 'cairn-workflows[steps]'`. Each call is a durable step like any other
(recorded, retried, replayed), in every style of workflow:

    from cairn.steps import db, http, tags, wait

    response = await http.request("GET", url, timeout_ms=5000)
    rows = await db.query("app", "SELECT id FROM orders WHERE state = :state", {"state": "new"})
    await tags.write_confirm("ns=2;s=Line1.Speed", 40, timeout_ms=2000, poll_ms=100)

The modules load their libraries (httpx, SQLAlchemy, asyncua) when first used.
"""

from __future__ import annotations

from cairn.steps import db, http, sleep, tags, wait
from cairn.steps.errors import (
    DatabaseError,
    DatabaseUnavailable,
    HttpStatusError,
    HttpUnavailable,
    InvalidSQL,
    NotYet,
    TagError,
    TagUnavailable,
    WaitTimeout,
)
from cairn.steps.opcua import OpcUaProvider
from cairn.steps.responses import HttpResponse
from cairn.steps.tags import TagProvider

__all__ = [
    "DatabaseError",
    "DatabaseUnavailable",
    "HttpResponse",
    "HttpStatusError",
    "HttpUnavailable",
    "InvalidSQL",
    "NotYet",
    "OpcUaProvider",
    "TagError",
    "TagProvider",
    "TagUnavailable",
    "WaitTimeout",
    "db",
    "http",
    "sleep",
    "tags",
    "wait",
]
