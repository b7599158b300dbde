"""Coded: a serializer whose stored texts pass through a codec; and the texts beside it.

The layers of a stored value, inside out: the serializer's text, its size check
(`cairn.limits`), the codec (here), and, outermost, the offload of big values. Most stored
texts are a serializer's and are coded by `Coded`; the few that are not (error texts,
human task answers, a mailbox's list of messages) are coded with `seal` and read back with
`unseal` or, where people are shown them, with `shown_error` and `shown_value`, which turn a
value this process has no key for into "encrypted (k1)" instead of an error.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from cairn import serialization
from cairn.codecs import sealed
from cairn.errors import KeyUnavailable, SerializationError
from cairn.serialization import Serializer


class Codec(Protocol):
    """Turns a stored text into another stored text and back (`Encrypted`)."""

    def encode(self, text: str) -> str:
        """The text to store for `text`."""
        ...

    def decode(self, text: str) -> str:
        """The text `encode` was given; a text it did not write, unchanged."""
        ...


class Coded:
    """`inner`'s texts passed through `codec` on their way to and from the store."""

    def __init__(self, inner: Serializer, codec: Codec) -> None:
        self.inner = inner
        self.codec = codec

    def dumps(self, value: Any, *, what: str) -> str:
        """`inner`'s text of `value`, encoded."""
        return self.codec.encode(self.inner.dumps(value, what=what))

    def loads(self, text: str) -> Any:
        """The value of a stored text (one written before the codec: as it is)."""
        return self.inner.loads(self.codec.decode(text))


def coding(serializer: Serializer, codec: Codec | None) -> Serializer:
    """`serializer` with its texts passed through `codec`; itself when `codec` is None."""
    return serializer if codec is None else Coded(serializer, codec)


def codec_of(serializer: Serializer) -> Codec | None:
    """The codec among `serializer`'s layers (each keeps the next as `inner`), if any."""
    layer: Any = serializer
    while layer is not None:
        if isinstance(layer, Coded):
            return layer.codec
        layer = getattr(layer, "inner", None)
    return None


def under_codec(serializer: Serializer) -> Serializer:
    """The layers of `serializer` below its codec (the plain text's); all, if it has none."""
    layer: Any = serializer
    while layer is not None:
        if isinstance(layer, Coded):
            return layer.inner
        layer = getattr(layer, "inner", None)
    return serializer


def seal(serializer: Serializer, text: str) -> str:
    """`text` as stored by a process whose values go through `serializer`."""
    codec = codec_of(serializer)
    return text if codec is None else codec.encode(text)


def unseal(serializer: Serializer, text: str) -> str:
    """The text `seal` was given.

    Raises:
        KeyUnavailable: `text` is encrypted and `serializer` has no key for it.
        SerializationError: the key does not open it.
    """
    codec = codec_of(serializer)
    if codec is not None:
        return codec.decode(text)
    key_id = sealed.key_of(text)
    if key_id is not None:
        raise KeyUnavailable(
            f"cannot decrypt a stored value: it was encrypted with key {key_id!r}, and this "
            "process has no keys (set CAIRN_KEYS or CAIRN_KEYS_FILE; see docs/howto/encryption.md)",
            key_id=key_id,
        )
    return text


def unseal_json(serializer: Serializer, text: str | None) -> Any:
    """The JSON value of a sealed text (an error, an answer); None for None."""
    return None if text is None else json.loads(unseal(serializer, text))


def stored_list(
    serializer: Serializer, texts: Sequence[str], whole: Callable[[str], str] | None = None
) -> str:
    """What `serializer.dumps` stores for the list of the values stored as `texts`.

    `whole`: a stored text in full, a reference's blob read (default: the serializer's
    own, which reads the blob store; core/run_values.py passes blobs read beforehand).
    """
    codec = codec_of(serializer)
    if codec is None:
        return serialization.encoded_list(texts)
    # An offloaded message is a reference to its (encrypted) blob: fetched first, since a
    # list of plain texts is encrypted whole and the references would be hidden inside it.
    if whole is None:
        whole = getattr(serializer, "whole", None)  # blobs.Offloaded, the outermost layer
    plain = [codec.decode(t if whole is None else whole(t)) for t in texts]
    return codec.encode(serialization.encoded_list(plain))


def shown_error(serializer: Serializer, text: str | None) -> dict[str, Any] | None:
    """A stored error for people: its dict, or "encrypted (k1)" without the key."""
    if text is None:
        return None
    try:
        return dict(unseal_json(serializer, text))
    except SerializationError:
        key_id = sealed.key_of(text)
        if key_id is None:
            raise
        # No type: one line reads "encrypted (k1)"; `encrypted` names the key it needs.
        return {
            "type": "",
            "message": sealed.placeholder(key_id),
            "traceback": "",
            "encrypted": key_id,
        }


def shown_text(serializer: Serializer, text: str) -> str:
    """A sealed text for people: as it was, or "encrypted (k1)" without the key."""
    try:
        return unseal(serializer, text)
    except SerializationError:
        return sealed.shown(text) or text


def shown_value(serializer: Serializer, text: str | None, *, plain_json: bool = False) -> Any:
    """A stored value for people: decoded, or "encrypted (k1)" without the key.

    `plain_json`: a sealed JSON text (a task's answer), not a serializer's.
    """
    if text is None:
        return None
    try:
        return unseal_json(serializer, text) if plain_json else serializer.loads(text)
    except (SerializationError, ValueError):
        words = sealed.shown(text)
        if words is None:
            raise
        return words
