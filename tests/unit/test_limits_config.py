"""Sizes and limits as settings: units, environment, bad values named."""

from __future__ import annotations

import pytest

from cairn import config
from cairn.errors import ConfigError
from cairn.limits import size_words


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("2MiB", 2 * 1024 * 1024),
        ("256 KiB", 256 * 1024),
        ("300kb", 300_000),
        ("1GB", 10**9),
        ("512", 512),
        ("512b", 512),
        (4096, 4096),
    ],
)
def test_parse_size__units(text: object, size: int) -> None:
    assert config.parse_size(text, what="max_value_size") == size


@pytest.mark.parametrize("bad", ["2 MiBs", "1.5MiB", "-3", "", True, 2.5, None, "0kb"])
def test_parse_size__bad_values_are_named(bad: object) -> None:
    with pytest.raises(ConfigError, match="max_value_size must be"):
        config.parse_size(bad, what="max_value_size")


def test_limits__environment_over_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAIRN_MAX_VALUE_SIZE", "1MiB")
    monkeypatch.setenv("CAIRN_MAX_HISTORY", "800")
    found = config.limits()
    # A limit below the default warning lowers the warning with it.
    assert (found.warn_value_bytes, found.max_value_bytes) == (256 * 1024, 1024 * 1024)
    assert (found.warn_history, found.max_history) == (800, 800)
    assert config.limits(max_history=900).max_history == 900  # an argument wins


def test_limits__a_bad_environment_value_names_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CAIRN_MAX_HISTORY", "lots")
    with pytest.raises(ConfigError, match="CAIRN_MAX_HISTORY must be a positive whole number"):
        config.limits()


def test_retention__environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAIRN_RETENTION", "2w")
    assert config.retention() == 14 * 86400
    monkeypatch.setenv("CAIRN_RETENTION", "forever")
    with pytest.raises(ConfigError, match="CAIRN_RETENTION"):
        config.retention()


def test_size_words() -> None:
    assert [size_words(n) for n in (512, 2048, 3 * 1024 * 1024)] == [
        "512 bytes",
        "2.0 KiB",
        "3.0 MiB",
    ]
