"""docs/reference/cli.md names every command and option `cairn --help` shows.

The reference is checked against the parser itself: its subcommands walked, each
command's options read, so a new command or option without its line in the reference
fails here.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from pathlib import Path

from cairn.cli.main import build_parser

REFERENCE = Path(__file__).parents[2] / "docs" / "reference" / "cli.md"


def commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every command that runs something: its words after `cairn`, and its parser."""
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subparsers:
        yield path, parser
        return
    for action in subparsers:
        for word, child in action.choices.items():
            yield from commands(child, (*path, word))


def options(parser: argparse.ArgumentParser) -> set[str]:
    """The long options of a command (--help, the same everywhere, left out)."""
    return {
        text
        for action in parser._actions
        for text in action.option_strings
        if text.startswith("--") and text != "--help"
    }


def synopsis() -> set[tuple[str, ...]]:
    """The commands the synopsis at the top of the reference lists (`a|b` is both)."""
    block = REFERENCE.read_text().split("```text", 1)[1].split("```", 1)[0]
    listed: set[tuple[str, ...]] = set()
    for line in block.splitlines():
        words = line.split()
        if not line.startswith("  ") or line.startswith("   ") or not words:
            continue  # a continuation line, or the `cairn [--db URL]` line
        first = tuple(words[0].split("|"))
        seconds = words[1].split("|") if len(words) > 1 else []
        for word in first:
            listed.add((word,))
            listed.update((word, second) for second in seconds)
    return listed


def test_the_synopsis_lists_every_command():
    listed = synopsis()
    missing = [" ".join(path) for path, _ in commands(build_parser()) if path not in listed]
    assert missing == [], f"docs/reference/cli.md's synopsis lacks: {missing}"


def test_the_reference_names_every_option_of_every_command():
    text = REFERENCE.read_text()
    missing = sorted(
        f"cairn {' '.join(path)} {option}"
        for path, parser in commands(build_parser())
        for option in options(parser)
        if not re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text)
    )
    assert missing == [], f"docs/reference/cli.md does not mention: {missing}"


def test_the_synopsis_shows_every_option_of_each_command():
    """Each command's line in the synopsis (and its continuation lines) names its options."""
    block = REFERENCE.read_text().split("```text", 1)[1].split("```", 1)[0]
    lines: dict[str, str] = {}
    current = ""
    for line in block.splitlines():
        if line.startswith("  ") and not line.startswith("   "):
            current = line.split()[0]
            lines[current] = lines.get(current, "") + "\n" + line
        elif current:
            lines[current] += "\n" + line
    shared = {"--db", "--module", "--version"}
    missing = sorted(
        f"cairn {' '.join(path)} {option}"
        for path, parser in commands(build_parser())
        for option in options(parser) - shared
        if not any(
            re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", lines.get(word, ""))
            for word in path[0].split("|")
        )
    )
    assert missing == [], f"docs/reference/cli.md's synopsis lacks: {missing}"


def test_every_help_fits_80_columns(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    wide = [
        f"cairn {' '.join(path)}: {line!r}"
        for path, parser in [((), build_parser()), *commands(build_parser())]
        for line in parser.format_help().splitlines()
        if len(line) > 80
    ]
    assert wide == []
