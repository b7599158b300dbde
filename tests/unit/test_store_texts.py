"""store/texts: the escape of free texts is reversible and leaves ordinary text alone."""

from __future__ import annotations

import pytest

from cairn.store import texts


@pytest.mark.parametrize(
    "text",
    [
        "",
        "plain",
        "C:\\path\\x00",
        "\x00",
        "\x01",
        "\x010",
        "\x011",
        "a\x00\x01b\x01\x00",
        "\x01" * 3,
    ],
)
def test_texts__stored_then_loaded_is_the_text(text: str) -> None:
    kept = texts.stored(text)
    assert "\x00" not in kept
    assert texts.loaded(kept) == text


def test_texts__text_without_nul_or_escape_is_stored_unchanged() -> None:
    text = 'Traceback (most recent call last):\n  File "C:\\x\\y.py"\nValueError: \\u0000'
    assert texts.stored(text) is text
    assert texts.loaded(text) is text


def test_texts__a_stray_escape_in_an_old_row_is_kept() -> None:
    assert texts.loaded("tail\x01") == "tail\x01"
    assert texts.loaded("a\x01zb") == "a\x01zb"
    assert texts.stored_or_none(None) is None and texts.loaded_or_none(None) is None
