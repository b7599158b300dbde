"""The dashboard's JSON reader: what it takes, and a one-line reason for everything it refuses."""

from __future__ import annotations

import json

import pytest

from cairn.dashboard.api import strict_json
from cairn.dashboard.api.strict_json import MAX_DEPTH


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize(
    "text",
    [
        '{"a": [1, 2.5, -0, "x", true, false, null], "b": {}}',
        '"\\ud83d\\ude00 \\u00e9"',  # a surrogate pair is one character
        "1e308",
        "-1e308",
        "9" * 4300,
        nested(MAX_DEPTH),
        '{"a": ' * (MAX_DEPTH - 1) + "[]" + "}" * (MAX_DEPTH - 1),
    ],
)
def test_loads__takes_json(text):
    assert strict_json.loads(text) == json.loads(text)
    assert strict_json.loads(text.encode("utf-8")) == json.loads(text)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (nested(MAX_DEPTH + 1), "nested more than 100 deep"),
        (nested(1000), "nested more than 100 deep"),
        (nested(100_000), "nested more than 100 deep"),
        ("[" * 100_000, "nested more than 100 deep"),
        ('{"a": ' * 1000 + "1" + "}" * 1000, "nested more than 100 deep"),
        ("NaN", "NaN is not JSON"),
        ("[-Infinity]", "-Infinity is not JSON"),
        ("[1e400]", "number 1e400 is out of range"),
        ("-1e400", "number -1e400 is out of range"),
        ("9" * 4301, "a number of 4301 digits is too long (the limit is 4300)"),
        ('"\\ud800"', "lone surrogate \\ud800"),
        ('["ok", "\\udc00x"]', "lone surrogate \\udc00"),
        ('{"\\ud83d": 1}', "lone surrogate \\ud83d"),
        ("{oops", "Expecting property name enclosed in double quotes: line 1 column 2"),
        ("", "Expecting value: line 1 column 1 (char 0)"),
    ],
)
def test_loads__refuses_with_the_reason(text, reason):
    with pytest.raises(ValueError) as caught:
        strict_json.loads(text)
    assert reason in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b'{"a": "\xff"}', "not UTF-8: byte 0xff at position 7"),
        (b'\xef\xbb\xbf{"a": 1}', "starts with a byte order mark"),
        ('{"a": 1}'.encode("utf-16"), "not UTF-8"),
    ],
)
def test_loads__bytes_must_be_utf8(raw, reason):
    with pytest.raises(ValueError, match=reason):
        strict_json.loads(raw)


def test_loads__a_long_flat_document_is_not_too_deep():
    text = json.dumps({"items": [{"n": n, "tags": ["a", "b"]} for n in range(50_000)]})
    assert len(strict_json.loads(text)["items"]) == 50_000
