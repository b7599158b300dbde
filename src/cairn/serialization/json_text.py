"""Compact, strict JSON text: the fast encoder and decoder every stored value goes through."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, NoReturn

from cairn.errors import SerializationError

# check_circular is off because every value is walked in Python first, and a reference
# cycle ends that walk with RecursionError.
# allow_nan is off so that what is stored is strict JSON any reader takes (a NaN or an
# infinity is stored as a tagged string instead).
_ENCODER = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), check_circular=False, allow_nan=False
)
DECODER = json.JSONDecoder()
"""The decoder of text with no tag in it (it needs no per-dict hook)."""


encode_basestring: Callable[[str], str] = json.encoder.encode_basestring
"""The JSON text of a str, as the encoder writes it (ensure_ascii off)."""


def _make_encode_json() -> Callable[[Any], str]:
    """The fastest compact JSON encoder available.

    ``JSONEncoder.encode`` rebuilds the C encoder on every call, which costs about as much as
    encoding a small dict; here it is built once. Should the private ``c_make_encoder`` be
    missing or have changed, the public encoder is used instead.
    """
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is not None:
        try:
            iterencode = make(
                None,
                _no_default,
                encode_basestring,
                None,
                ":",
                ",",
                False,
                False,
                False,
            )
            if "".join(iterencode({"a": [1.5, None, "é"]}, 0)) == '{"a":[1.5,null,"é"]}':
                return lambda value: "".join(iterencode(value, 0))
        except Exception:
            pass
    return _ENCODER.encode


def _no_default(value: object) -> NoReturn:
    raise TypeError(f"Object of type {type(value).__qualname__} is not JSON serializable")


encode_json = _make_encode_json()


def decode_json(decoder: json.JSONDecoder, text: str) -> Any:
    """The value of `text`, read by `decoder`.

    raw_decode skips decode()'s two whitespace scans; text cairn wrote has no padding.
    """
    try:
        value, end = decoder.raw_decode(text)
        if end == len(text):
            return value
    except ValueError:
        pass
    return decoder.decode(text)  # padded or malformed: the full decoder says which


def check_unicode(text: str, what: str) -> None:
    """SerializationError when `text` holds a lone surrogate, which no store can encode."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = text[exc.start : exc.end]
        raise SerializationError(
            f"cannot serialize {what}: it holds a lone surrogate {bad!r}, which is not valid "
            "Unicode (decode bytes with errors='replace' or keep them as bytes)",
            what=what,
            type_name="builtins.str",
        ) from None
