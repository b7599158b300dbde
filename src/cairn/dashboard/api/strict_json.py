"""Reading JSON that came over HTTP: every way it can be unreadable is a ValueError naming it.

Stricter than `json.loads` where its leniency would let bad input through to a 500 or to
the store: no NaN or Infinity, no number too large for a float, no lone surrogate (it
cannot be stored as UTF-8), no nesting deeper than MAX_DEPTH (the parser would exhaust
the stack), and bytes must be UTF-8.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

MAX_DEPTH = 100
"""Arrays and objects inside one another, at most: far beyond any real payload."""

MAX_DIGITS = 4300
"""Digits of an integer, at most (Python's own limit for converting text to int)."""

_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")


def loads(text: str | bytes) -> Any:
    """The JSON value of `text`; ValueError with a one-line reason when it is not one."""
    if isinstance(text, bytes):
        text = _utf8(text)
    elif _LONE_SURROGATE.search(text):  # decoded text never holds one; a str might
        raise ValueError(_surrogate(text))
    try:
        found = json.loads(text, parse_constant=_constant, parse_float=_float, parse_int=_int)
    except RecursionError:
        raise ValueError(f"nested more than {MAX_DEPTH} deep") from None
    except json.JSONDecodeError as exc:
        raise ValueError(str(exc)) from None
    _check_depth(found)
    if _SURROGATE_ESCAPE.search(text):  # rare: only then look at every string
        _check_surrogates(found)
    return found


def _utf8(raw: bytes) -> str:
    if raw.startswith(b"\xef\xbb\xbf"):
        raise ValueError("starts with a byte order mark; send UTF-8 without one")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = raw[exc.start : exc.start + 1].hex()
        raise ValueError(f"not UTF-8: byte 0x{bad} at position {exc.start}") from None


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"number {text} is out of range")
    return number


def _int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_DIGITS:
        raise ValueError(f"a number of {digits} digits is too long (the limit is {MAX_DIGITS})")
    return int(text)


def _check_depth(found: Any) -> None:
    """ValueError when containers nest deeper than MAX_DEPTH (checked without recursion)."""
    if not isinstance(found, dict | list):
        return
    level: list[Any] = [found]
    depth = 1
    while level:
        if depth > MAX_DEPTH:
            raise ValueError(f"nested more than {MAX_DEPTH} deep")
        inner: list[Any] = []
        for item in level:
            values = item.values() if isinstance(item, dict) else item
            inner.extend(v for v in values if isinstance(v, dict | list))
        level = inner
        depth += 1


def _check_surrogates(found: Any) -> None:
    """ValueError naming the first string (or key) holding half of a surrogate pair."""
    pending = [found]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            strings: Any = (item,)
        elif isinstance(item, dict):
            strings = item.keys()
            pending.extend(item.values())
        elif isinstance(item, list):
            strings = ()
            pending.extend(item)
        else:
            continue
        for text in strings:
            if _LONE_SURROGATE.search(text):
                raise ValueError(_surrogate(text))


def _surrogate(text: str) -> str:
    found = _LONE_SURROGATE.search(text)
    code = f"\\u{ord(found.group()):04x}" if found else "?"
    return f"lone surrogate {code}: half of a character, not text"
