"""The OpenAPI 3 document of /api/v1, built from the operations the API serves."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from cairn import __version__
from cairn.dashboard.api.operations import NAME, Operation

_REASONS = {
    400: "Bad request: JSON, field or parameter the API cannot read",
    401: "Missing or wrong bearer token",
    403: "Sent by a browser from a page of another origin",
    404: "No such run, task, schedule or hook",
    409: "Conflict with the current state (e.g. the run has finished)",
    415: "A body that is not Content-Type: application/json",
    421: "The Host (or X-Forwarded-Host) is not a name this dashboard serves",
    422: "Values cairn rejects: a name or id that is not one (InvalidName: empty, over 255 "
    "characters, a NUL), an unknown workflow, arguments that do not fit it, an invalid "
    "form submission (which lists `fields`)",
    500: "Internal failure (details only in the dashboard's log)",
    503: "The database is unavailable for now",
}

_ERROR = {
    "type": "object",
    "required": ["error", "message"],
    "properties": {
        "error": {"type": "string", "description": "cairn error class, or BadRequest, ..."},
        "message": {"type": "string"},
        "fields": {
            "type": "object",
            "additionalProperties": {"type": "string"},
            "description": "per-field problems of a rejected submission (422)",
        },
    },
}


# A hook's token: whatever the hook was given (an unknown one is a 404, never a 422).
_TOKEN = {"type": "string", "minLength": 1}


def _operation_id(op: Operation) -> str:
    words = re.findall(r"[a-z]+", op.template.replace("{", "by_").replace("}", ""))
    return "_".join([op.method.lower(), *words])


def _describe(op: Operation, *, guarded: bool) -> dict[str, Any]:
    parameters: list[dict[str, Any]] = [
        {
            "name": name,
            "in": "path",
            "required": True,
            "description": "percent-encoded as one path segment (`/` as %2F, `#` as %23)",
            "schema": _TOKEN if name == "token" else NAME,
        }
        for name in re.findall(r"{(\w+)}", op.template)
    ]
    parameters += [
        {"name": p.name, "in": "query", "description": p.description, "schema": p.schema}
        for p in op.query
    ]
    statuses = {400, 421, 500, 503, *op.errors}
    if op.method != "GET":  # a change: the guard's checks on where it comes from
        statuses |= {403, 415}
    if guarded and not op.public:
        statuses.add(401)
    responses: dict[str, Any] = {
        str(status): {
            "description": meaning,
            "content": op.content or {"application/json": {"schema": {"type": "object"}}},
        }
        for status, meaning in ((op.ok, "Success"), *op.also)
    }
    for status in sorted(statuses):
        responses[str(status)] = {
            "description": _REASONS[status],
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
        }
    described: dict[str, Any] = {
        "operationId": _operation_id(op),
        "summary": op.summary,
        **({"description": op.description} if op.description else {}),
        "parameters": parameters,
        "responses": responses,
    }
    if op.body is not None:
        described["requestBody"] = {
            "required": op.method == "POST" and bool(op.body.get("required")),
            "content": {"application/json": {"schema": op.body}},
        }
    if op.public:
        described["security"] = []
    return described


def document(operations: Iterable[Operation], *, guarded: bool) -> dict[str, Any]:
    """The OpenAPI document; `guarded` when a bearer token protects the API."""
    paths: dict[str, dict[str, Any]] = {}
    for op in operations:
        paths.setdefault(op.template, {})[op.method.lower()] = _describe(op, guarded=guarded)
    doc: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {
            "title": "cairn dashboard API",
            "version": __version__,
            "description": "Inspect and steer cairn runs. Errors are "
            '{"error": NAME, "message": TEXT}.',
        },
        "servers": [{"url": "/api/v1"}],
        "paths": paths,
        "components": {"schemas": {"Error": _ERROR}},
    }
    if guarded:
        doc["components"]["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        doc["security"] = [{"bearer": []}]
    return doc
