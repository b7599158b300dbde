"""A step's input as its journal entry keeps it: compact, bounded, never a reason to fail.

The input rides on the write of the step's outcome (it costs no write of its own) and is
read back only for the run's history; a replay never needs it. It is stored as the JSON
array of the positional arguments, or `{"args": [...], "kwargs": {...}}` when some are
named, or an `{"omitted": "<why>"}` marker; `shown` gives people the one dict shape.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

from cairn import limits
from cairn.codecs import coded
from cairn.core import hook_tokens
from cairn.serialization import Serializer

# Larger inputs are replaced by a marker: the journal is read whole by every history.
MAX_BYTES = 64 * 1024
NO_ARGUMENTS = "[]"
_UTF8_MAX = 4  # bytes per character at most: a text this many times shorter fits


def serialize(
    serializer: Serializer,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    hidden: Collection[str] = (),
) -> str:
    """The stored text of a step's arguments, in the run's serializer, or a marker.

    The marker stands in for arguments that cannot be serialized or whose text is over
    MAX_BYTES (UTF-8): the step runs either way. Most steps take positional arguments
    only, so their input is stored as the bare array: this runs before every step.
    `hidden` are the run's hook tokens, replaced by `[hook token]` wherever they appear.
    """
    if not args and not kwargs:
        return NO_ARGUMENTS
    # Shown only, and cut to MAX_BYTES below: no size check; composed and hidden in the
    # clear, then sealed whole by the run's codec (encrypted at rest, if it encrypts).
    # The engine's outermost layer (blobs.Offloaded) keeps both, found once.
    layers = getattr(serializer, "inputs", None)
    if layers is None:
        layers = (limits.unlimited(coded.under_codec(serializer)), coded.codec_of(serializer))
    plain, codec = layers
    try:
        text = plain.dumps(list(args), what="the step's args")
        if kwargs:
            named = plain.dumps(kwargs, what="the step's kwargs")
            text = f'{{"args":{text},"kwargs":{named}}}'
    except Exception as exc:  # any failure: keeping the input must never fail the step
        text = omitted(" ".join(str(exc).split())[:500] or type(exc).__name__)
        return text if codec is None else codec.encode(text)
    if hidden:
        text = hook_tokens.hide(text, hidden)
    if len(text) * _UTF8_MAX > MAX_BYTES:
        size = len(text.encode())
        if size > MAX_BYTES:
            return omitted(
                f"the step's input is {size:,} bytes as JSON, over the {MAX_BYTES:,} kept"
            )
    return text if codec is None else codec.encode(text)


def omitted(reason: str) -> str:
    """The marker stored instead of an input, saying why."""
    return json.dumps({"omitted": reason}, ensure_ascii=False)


NOT_KEPT = json.dumps({"omitted": "declared keep_input=False"})


def shown(value: Any) -> Any:
    """A stored input, once deserialized, as history shows it.

    `{"args": [...], "kwargs": {...}}`, or the `{"omitted": ...}` marker; a text that
    could not be deserialized is passed through.
    """
    if isinstance(value, list):
        return {"args": value, "kwargs": {}}
    return value
