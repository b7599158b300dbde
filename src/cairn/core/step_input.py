"""A step's input as its journal entry keeps it: bounded, and never a reason to fail.

The input rides on the write of the step's outcome (it costs no write of its own) and is
read back only for the run's history; a replay never needs it.
"""

from __future__ import annotations

import json
from typing import Any

from cairn.serialization import Serializer

# Larger inputs are replaced by a marker: the journal is read whole by every history.
MAX_BYTES = 64 * 1024
# What the JSON serializers make of a step called without arguments, without calling them.
NO_ARGUMENTS = '{"args":[],"kwargs":{}}'
_UTF8_MAX = 4  # bytes per character at most: a text this many times shorter fits


def serialize(
    serializer: Serializer, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> str:
    """`{"args": [...], "kwargs": {...}}` in the run's serializer, or an `omitted` marker.

    The marker, `{"omitted": "<why>"}`, stands in for arguments that cannot be serialized
    or whose text is over MAX_BYTES: the step runs either way.
    """
    if not args and not kwargs:
        return NO_ARGUMENTS
    try:
        text = serializer.dumps(
            {"args": list(args), "kwargs": kwargs}, what=f"input of step {name!r}"
        )
    except Exception as exc:  # any failure: keeping the input must never fail the step
        return omitted(" ".join(str(exc).split())[:500] or type(exc).__name__)
    if len(text) * _UTF8_MAX > MAX_BYTES:
        size = len(text.encode())
        if size > MAX_BYTES:
            return omitted(
                f"input of step {name!r} is {size:,} bytes as JSON, "
                f"more than the {MAX_BYTES:,} kept"
            )
    return text


def omitted(reason: str) -> str:
    """The marker stored instead of an input, saying why."""
    return json.dumps({"omitted": reason}, ensure_ascii=False)
