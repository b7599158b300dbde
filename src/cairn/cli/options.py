"""What every command shares: global options, and turning typed text into Python values.

Values follow one rule everywhere: text that parses as JSON is that JSON value, anything
else is the string itself (`42` is a number, `"42"` and `o-1` are strings).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypeVar

from cairn import config
from cairn.cli import output
from cairn.errors import ConfigError
from cairn.runtime.engine import Engine
from cairn.runtime.opening import engine_on
from cairn.store.migrate import SchemaMissing

T = TypeVar("T")


class UsageError(Exception):
    """Bad usage found after parsing (e.g. `queues set NAME` with nothing to set): exit 2."""


@dataclass(frozen=True, slots=True)
class Globals:
    """Settings resolved from --db, -m/--module, the environment and pyproject.toml."""

    url: str
    modules: tuple[str, ...]


def add_global_options(parser: argparse.ArgumentParser, *, suffix: str = "") -> None:
    """Add --db and -m/--module to `parser`, stored as `db{suffix}` and `modules{suffix}`.

    The top-level parser and every sub-command get them, so they may stand before or
    after the command name.
    """
    parser.add_argument(
        "--db",
        dest=f"db{suffix}",
        metavar="URL",
        default=None,
        help="database URL: sqlite:///file.db, file:///dir, memory://, postgresql://... "
        "(default: CAIRN_DATABASE_URL, else url in cairn.yaml or [tool.cairn] in "
        "pyproject.toml, else sqlite:///cairn.db)",
    )
    parser.add_argument(
        "-m",
        "--module",
        dest=f"modules{suffix}",
        metavar="MODULE",
        action="append",
        default=None,
        help="import MODULE to register its workflows (repeatable; default: CAIRN_MODULES, "
        "else modules in cairn.yaml or [tool.cairn])",
    )


def resolve_globals(ns: argparse.Namespace) -> Globals:
    """Merge the global options given before and after the command name."""
    db = getattr(ns, "db_cmd", None) or getattr(ns, "db", None)
    modules = [*(getattr(ns, "modules", None) or []), *(getattr(ns, "modules_cmd", None) or [])]
    return Globals(url=config.database_url(db), modules=config.modules(modules))


def import_module(name: str) -> ModuleType:
    """Import a user module, the current directory first on the path; ConfigError on failure.

    Any exception raised while importing (a syntax error, a failing top-level statement)
    becomes a one-line ConfigError naming the module.
    """
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(name)
    except Exception as exc:
        detail = " ".join(str(exc).split()) or "no message"
        hint = ""
        if name.endswith(".py") or "/" in name or name.startswith("."):  # a file's path
            dotted = name.removesuffix(".py").removeprefix("./").replace("/", ".")
            example = "" if name.startswith(("/", "..")) else f", e.g. {dotted!r}"
            hint = f" (name the module as Python imports it{example}, not a file)"
        raise ConfigError(
            f"cannot import module {name!r}: {type(exc).__name__}: {detail}{hint}"
        ) from exc


def import_modules(names: tuple[str, ...]) -> None:
    """Import every module of -m/--module (or the configured ones)."""
    for name in names:
        import_module(name)


def with_engine(
    glob: Globals, work: Callable[[Engine], Coroutine[Any, Any, T]], *, creates: bool = False
) -> T:
    """Run `work` on an engine without workers: it reads and writes, never executes a run.

    Runs it starts, retries or wakes are left for `cairn worker`. Unless `creates` (a
    command that defines work: `schedules create`, `queues set`), it opens only a
    database that has cairn's schema at this version (see `refusal`): a command that
    reads or steers never creates one where a mistyped --db points, nor migrates one.
    """
    import_modules(glob.modules)

    async def go() -> T:
        settings = {"workers": 0, "modules": glob.modules}
        async with engine_on(glob.url, migrate=creates, **settings) as engine:
            return await work(engine)

    return asyncio.run(go())


def refusal(url: str, exc: SchemaMissing) -> str:
    """The one line for a command refused a database without cairn's current schema."""
    shown = output.redact(url)
    if exc.applied:
        return (
            f"database {shown} has cairn schema version {exc.applied}, older than this "
            f"cairn's ({exc.newest}); this command does not migrate: run `cairn db upgrade`"
        )
    creators = "`cairn db upgrade` or `cairn worker` creates one"
    return f"no cairn database at {shown} ({exc.reason}); {creators}"


# Name prefixes of the engine's thread pools (runtime/engine.py).
_RUN_THREADS = ("cairn-step", "cairn-workflow")


def busy_run_threads(*, wait: float = 0.5) -> int:
    """How many engine threads still run user code after the engine closed.

    Idle pool threads exit within moments, so each gets up to `wait` seconds in all. A
    sync step cannot be interrupted; its run is already handed back by then, so the
    process should exit without joining its thread (see `main.main`).
    """
    deadline = time.monotonic() + wait
    busy = 0
    for thread in threading.enumerate():
        if thread.name.startswith(_RUN_THREADS):
            thread.join(max(0.0, deadline - time.monotonic()))
            busy += thread.is_alive()
    return busy


def _no_constant(name: str) -> Any:
    # json.loads accepts NaN and Infinity; on a command line they are words, not numbers.
    raise ValueError(name)


def parse_value(text: str) -> Any:
    """`text` as JSON when it parses, else the string itself."""
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except ValueError:
        return text
    if isinstance(value, float) and not math.isfinite(value):
        return text  # 1e999 overflows to inf
    return value


def parse_argument(text: str, *, what: str) -> Any:
    """A value given on the command line: JSON when it parses, else the string itself.

    Text that starts like a JSON object or array but does not parse is a mistake, not a
    string to send: UsageError naming `what` (exit 2), so nothing is stored or sent.
    """
    value = parse_value(text)
    if value is text and text.lstrip()[:1] in ("{", "["):
        try:
            json.loads(text)
        except ValueError as exc:
            raise UsageError(
                f"{what} {_clip(text)!r} starts like JSON but is not valid JSON ({exc}); "
                "to pass it as text, quote it as a JSON string"
            ) from None
    return value


def parse_file(path: str, *, what: str) -> Any:
    """The JSON value in file `path` (`-`: stdin); ValueError names `what`, the file and why."""
    name = "stdin" if path == "-" else repr(path)
    try:
        if path == "-":
            text = sys.stdin.read()
        else:
            with open(path, encoding="utf-8") as file:
                text = file.read()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ValueError(f"{what} {name}: cannot read it ({reason})") from None
    try:
        return json.loads(text, parse_constant=_no_constant)
    except ValueError as exc:
        raise ValueError(f"{what} {name} is not valid JSON ({exc})") from None


def parse_input(text: str | None) -> dict[str, Any]:
    """The keyword arguments of `--input`: a JSON object; ValueError names the problem."""
    if text is None:
        return {}
    return parse_object(text, what="--input", of="keyword arguments")


def parse_object(text: str, *, what: str, of: str = "values") -> dict[str, Any]:
    """`text` as a JSON object; UsageError (exit 2) names `what` and the problem."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{what} is not valid JSON ({exc}): {_clip(text)!r}") from None
    if not isinstance(value, dict):
        raise UsageError(
            f"{what} must be a JSON object of {of}, got {type(value).__name__}: {_clip(text)!r}"
        )
    return value


def limit(text: str) -> int | None:
    """An argparse type: a whole number, or `none` (no limit) as None."""
    if text.strip().lower() == "none":
        return None
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"invalid limit {text!r} (a positive integer, or none to remove the limit)"
        ) from None


def parse_where(items: list[str] | None) -> dict[str, Any]:
    """`COL=VALUE` filters as a dict; the value is JSON-or-string. ValueError names a bad one."""
    found: dict[str, Any] = {}
    for item in items or ():
        name, sep, raw = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise ValueError(f"--where {item!r} is not COL=VALUE (e.g. --where order_no=42)")
        if not name.replace("_", "a").replace(".", "a").replace("-", "a").isalnum():
            raise ValueError(
                f"--where {item!r}: column name {name!r} may hold only letters, digits, "
                "'_', '-' and '.'"
            )
        if name in found:
            raise ValueError(f"--where names column {name!r} twice")
        found[name] = parse_value(raw)
    return found


def _clip(text: str, width: int = 60) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
