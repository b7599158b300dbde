"""A step's input as its journal entry keeps it: serialized, bounded, never fatal."""

from __future__ import annotations

import json
from typing import Any

from cairn.core import hook_tokens, step_input
from cairn.serialization import JsonSerializer


class Exploding:
    """A serializer that fails in a way no serializer of cairn's does."""

    def dumps(self, value: Any, *, what: str) -> str:
        raise RuntimeError("disk\non fire")

    def loads(self, text: str) -> Any:
        return json.loads(text)


def test_serialize__positional_arguments_alone_are_a_bare_array() -> None:
    serializer = JsonSerializer()
    positional = step_input.serialize(serializer, (1, "b", (2, 3)), {})
    named = step_input.serialize(serializer, (1,), {"c": (2, 3), "__cairn__": "x"})
    nothing = step_input.serialize(serializer, (), {})

    assert positional == serializer.dumps([1, "b", (2, 3)], what="x")
    assert nothing == serializer.dumps([], what="x")
    whole = serializer.dumps({"args": [1], "kwargs": {"c": (2, 3), "__cairn__": "x"}}, what="x")
    assert serializer.loads(named) == serializer.loads(whole)
    shown = [step_input.shown(serializer.loads(t)) for t in (positional, named, nothing)]
    assert shown == [
        {"args": [1, "b", (2, 3)], "kwargs": {}},
        {"args": [1], "kwargs": {"c": (2, 3), "__cairn__": "x"}},
        {"args": [], "kwargs": {}},
    ]


def test_serialize__any_failure_of_the_serializer_becomes_a_marker() -> None:
    text = step_input.serialize(Exploding(), (1,), {})

    assert json.loads(text) == {"omitted": "disk on fire"}


def test_serialize__the_cap_counts_utf8_bytes() -> None:
    room = step_input.MAX_BYTES - len(step_input.serialize(JsonSerializer(), ("",), {}))
    at_cap = "x" * (room % 2) + "é" * (room // 2)  # "é" is 2 bytes in UTF-8

    kept = step_input.serialize(JsonSerializer(), (at_cap,), {})
    over = step_input.serialize(JsonSerializer(), (at_cap + "x",), {})

    assert len(kept.encode()) == step_input.MAX_BYTES
    assert json.loads(kept) == [at_cap]
    assert json.loads(over) == {
        "omitted": "the step's input is 65,537 bytes as JSON, over the 65,536 kept"
    }


def test_serialize__hook_tokens_are_replaced_wherever_they_appear() -> None:
    token = "Yw3vQ-abc_123XYZ0123456789abcdef"
    given = (f"https://example.com/hooks/{token}",)

    text = step_input.serialize(JsonSerializer(), given, {"t": token}, hidden={token, "other"})

    assert json.loads(text) == {
        "args": ["https://example.com/hooks/[hook token]"],
        "kwargs": {"t": "[hook token]"},
    }


def test_hook_tokens__never_start_with_a_dash_a_command_line_reads_as_an_option() -> None:
    # One token in 64 started with "-": `cairn hooks resume -Kx...` failed as an option.
    tokens = [hook_tokens.new_token() for _ in range(3000)]
    assert not [t for t in tokens if t.startswith("-")]
    assert {len(t) for t in tokens} == {32}
