"""Where settings come from: arguments, CAIRN_* environment, [tool.cairn] in pyproject.toml.

The only module that reads the environment.
"""

from __future__ import annotations

import os
import tomllib
from datetime import timedelta
from pathlib import Path

from cairn import durations
from cairn.errors import ConfigError

DEFAULT_URL = "sqlite:///cairn.db"
DEFAULT_KNOWN_WORKERS_WINDOW = "7d"


def _pyproject() -> dict[str, object]:
    path = Path.cwd() / "pyproject.toml"
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from exc
    section = data.get("tool", {}).get("cairn", {})
    return section if isinstance(section, dict) else {}


def database_url(explicit: str | None = None) -> str:
    """The database URL: argument, else CAIRN_DATABASE_URL, else [tool.cairn] url, else default."""
    if explicit:
        return explicit
    env = os.environ.get("CAIRN_DATABASE_URL")
    if env:
        return env
    url = _pyproject().get("url")
    return url if isinstance(url, str) and url else DEFAULT_URL


def modules(explicit: tuple[str, ...] | list[str] = ()) -> tuple[str, ...]:
    """Workflow modules to import: argument, else CAIRN_MODULES (comma list), else pyproject."""
    if explicit:
        return tuple(explicit)
    env = os.environ.get("CAIRN_MODULES")
    if env:
        return tuple(m.strip() for m in env.split(",") if m.strip())
    found = _pyproject().get("modules", [])
    if isinstance(found, str):
        return (found,)
    if isinstance(found, list) and all(isinstance(m, str) for m in found):
        return tuple(found)
    raise ConfigError("[tool.cairn] modules must be a list of module names")


def dashboard_token(explicit: str | None = None) -> str | None:
    """The dashboard's bearer token: argument, else CAIRN_DASHBOARD_TOKEN, else None."""
    if explicit:
        return explicit
    return os.environ.get("CAIRN_DASHBOARD_TOKEN") or None


def known_workers_window(explicit: object = None) -> float:
    """Seconds a worker's workflows stay known after it was last seen, for starts by name.

    Argument, else CAIRN_KNOWN_WORKERS_WINDOW, else [tool.cairn] known_workers_window,
    else 7 days; a duration ("7d", "12h", seconds). ConfigError names a bad one.
    """
    value: object = explicit
    where = "known_workers_window"
    if value is None:
        value = os.environ.get("CAIRN_KNOWN_WORKERS_WINDOW") or None
        where = "CAIRN_KNOWN_WORKERS_WINDOW"
    if value is None:
        value = _pyproject().get("known_workers_window")
        where = "[tool.cairn] known_workers_window"
    if value is None:
        value = DEFAULT_KNOWN_WORKERS_WINDOW
    if isinstance(value, bool) or not isinstance(value, str | int | float | timedelta):
        raise ConfigError(f"{where} must be a duration such as '7d', got {value!r}")
    try:
        return durations.parse(value, what=where).total_seconds()
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
