"""The JSON form of cairn's rich values, shared by `--json` output and the HTTP API.

Datetimes become ISO 8601 text in UTC, Decimal and UUID strings, bytes base64, sets and
tuples lists, dataclasses and pydantic models objects.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import json
import uuid
from collections.abc import Mapping
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any


def jsonable(value: Any) -> Any:
    """`value` made of JSON types only (see the module docstring for the mapping)."""
    kind = type(value)  # the plain types first: histories are mostly made of them
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is dict:
        return {k if type(k) is str else str(k): jsonable(v) for k, v in value.items()}
    if kind is list:
        return [jsonable(v) for v in value]
    if isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else None
    if isinstance(value, enum.Enum):
        return jsonable(value.value)
    if isinstance(value, datetime):
        return (value if value.tzinfo is None else value.astimezone(UTC)).isoformat()
    if isinstance(value, date | time):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, Decimal | uuid.UUID):
        return str(value)
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, set | frozenset):
        items = [jsonable(v) for v in value]
        try:
            return sorted(items)
        except TypeError:
            return items
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return jsonable(dump(mode="json"))
    return repr(value)


def dumps(value: Any, *, indent: int | None = 2) -> str:
    """JSON text of `value`, its rich values converted as `jsonable` converts them."""
    try:
        # The C encoder walks the plain data; `jsonable` sees only what it cannot encode.
        return json.dumps(
            value, indent=indent, ensure_ascii=False, allow_nan=False, default=jsonable
        )
    except (ValueError, TypeError):  # NaN or infinity, or a key that is not text or a number
        return json.dumps(jsonable(value), indent=indent, ensure_ascii=False)
