"""The stack of a stored value's layers: one length check for small values, same verdicts."""

from __future__ import annotations

import logging

import pytest

from cairn.blobs.reference import PREFIX
from cairn.codecs import Encrypted
from cairn.config import Limits
from cairn.core import step_input
from cairn.errors import SerializationError
from cairn.runtime import value_layers
from cairn.serialization import Serializer


def stack(*, inline: int, warn: int, most: int, codec: Encrypted | None = None) -> Serializer:
    sizes = Limits(warn_value_bytes=warn, max_value_bytes=most)
    return value_layers.stack("json", sizes, codec, object(), inline_limit=inline, blobs="memory:")


@pytest.mark.parametrize(
    "codec", [None, Encrypted({"k1": bytes(32)}, current="k1")], ids=["plain", "encrypted"]
)
@pytest.mark.parametrize(("inline", "warn"), [(10_000, 100), (100, 10_000)])
def test_stack__warns_refuses_and_offloads_by_the_same_sizes_whichever_is_lower(
    caplog: pytest.LogCaptureFixture, codec: Encrypted | None, inline: int, warn: int
) -> None:
    serializer = stack(inline=inline, warn=warn, most=20_000, codec=codec)
    caplog.set_level(logging.WARNING, logger="cairn.limits")

    small = serializer.dumps("x" * 10, what="small")
    assert serializer.loads(small) == "x" * 10
    assert not caplog.records
    middle = serializer.dumps("x" * 1000, what="middle")
    assert serializer.loads(middle) == "x" * 1000
    assert middle.startswith(PREFIX) == (inline < 1000)
    assert [r.getMessage().split(" is ")[0] for r in caplog.records] == (
        ["cairn: middle"] if warn < 1000 else []
    )
    with pytest.raises(SerializationError, match="max_value_size"):
        serializer.dumps("x" * 30_000, what="big")


def test_step_input__composed_below_the_codec_and_sealed_whole() -> None:
    codec = Encrypted({"k1": bytes(32)}, current="k1")
    serializer = stack(inline=100, warn=100, most=1000, codec=codec)

    text = step_input.serialize(serializer, ("x" * 500,), {"n": 1})

    assert codec.decode(text) == '{"args":["' + "x" * 500 + '"],"kwargs":{"n":1}}'
