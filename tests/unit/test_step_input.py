"""A step's input as its journal entry keeps it: serialized, bounded, never fatal."""

from __future__ import annotations

import json
from typing import Any

from cairn.core import step_input
from cairn.serialization import JsonSerializer


class Exploding:
    """A serializer that fails in a way no serializer of cairn's does."""

    def dumps(self, value: Any, *, what: str) -> str:
        raise RuntimeError("disk\non fire")

    def loads(self, text: str) -> Any:
        return json.loads(text)


def test_serialize__arguments_as_the_runs_are_stored() -> None:
    text = step_input.serialize(JsonSerializer(), "add", (1, "b"), {"c": None})

    assert json.loads(text) == {"args": [1, "b"], "kwargs": {"c": None}}


def test_serialize__no_arguments_is_the_serializers_own_text() -> None:
    made = JsonSerializer().dumps({"args": [], "kwargs": {}}, what="x")

    assert step_input.serialize(JsonSerializer(), "tick", (), {}) == made


def test_serialize__any_failure_of_the_serializer_becomes_a_marker() -> None:
    text = step_input.serialize(Exploding(), "add", (1,), {})

    assert json.loads(text) == {"omitted": "disk on fire"}


def test_serialize__the_cap_counts_utf8_bytes() -> None:
    room = step_input.MAX_BYTES - len(step_input.serialize(JsonSerializer(), "s", ("",), {}))
    at_cap = "x" * (room % 2) + "é" * (room // 2)  # "é" is 2 bytes in UTF-8

    kept = step_input.serialize(JsonSerializer(), "s", (at_cap,), {})
    over = step_input.serialize(JsonSerializer(), "s", (at_cap + "x",), {})

    assert len(kept.encode()) == step_input.MAX_BYTES
    assert json.loads(kept)["args"] == [at_cap]
    assert json.loads(over) == {
        "omitted": "input of step 's' is 65,537 bytes as JSON, more than the 65,536 kept"
    }
