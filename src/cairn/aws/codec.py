"""cairn's JSON codec as the SDK's SerDes: step and child results checkpointed as cairn stores them.

A dataclass, datetime or Decimal a step returns comes back as itself on replay, as it does
under `cairn worker`; plain JSON values stay plain JSON in the execution's history.
"""

from __future__ import annotations

import json
from typing import Any

from aws_durable_execution_sdk_python.serdes import SerDes, SerDesContext

from cairn.errors import InvalidSubmission, SerializationError
from cairn.serialization import JsonSerializer

_CODEC = JsonSerializer()


class CairnSerDes(SerDes[Any]):
    """The SDK's SerDes over cairn's JsonSerializer."""

    def serialize(self, value: Any, serdes_context: SerDesContext) -> str:
        """`value` as cairn's tagged JSON text (SerializationError names the operation)."""
        return _CODEC.dumps(value, what=f"result of operation {serdes_context.operation_id}")

    def deserialize(self, data: str, serdes_context: SerDesContext) -> Any:
        """A value `serialize` wrote."""
        return _CODEC.loads(data)


SERDES = CairnSerDes()


def plain(value: Any, what: str) -> Any:
    """`value` as plain JSON data (rich values in cairn's tagged form): what a handler returns."""
    return json.loads(_CODEC.dumps(value, what=what))


def decoded(value: Any) -> Any:
    """JSON data with cairn's tagged values read back (an event's arguments)."""
    return _CODEC.loads(json.dumps(value))


def payload(text: str | None, what: str) -> Any:
    """The JSON an outside system sent to a callback; InvalidSubmission naming `what` if not."""
    if text is None or not text.strip():
        return None
    try:
        return _CODEC.loads(text)
    except (SerializationError, ValueError) as exc:
        raise InvalidSubmission(
            f"the callback payload of {what} is not JSON: {exc}",
            fields={"(payload)": "not JSON"},
        ) from None
