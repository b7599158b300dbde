"""Where settings come from: arguments, CAIRN_* environment, cairn.yaml, [tool.cairn].

Each setting is taken from the first of these that gives it (cairn.yaml over
pyproject.toml's [tool.cairn], key by key). The only module that reads the environment.
It reads; it opens nothing (the step library turns `Resources` into connections).
"""

from __future__ import annotations

import functools
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from cairn import config_yaml, durations
from cairn.errors import ConfigError

DEFAULT_URL = "sqlite:///cairn.db"
DEFAULT_KNOWN_WORKERS_WINDOW = "7d"


def _pyproject() -> dict[str, object]:
    path = Path.cwd() / "pyproject.toml"
    try:
        text = path.read_text(encoding="utf-8")
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return {}
    return _tool_cairn(str(path), text)


# Every setting reads the files and an Engine reads a dozen settings: each text is parsed
# once (keyed by its content, so a changed file is read anew at the next setting).
@functools.lru_cache(maxsize=8)
def _tool_cairn(path: str, text: str) -> dict[str, object]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from exc
    section = data.get("tool", {}).get("cairn", {})
    return section if isinstance(section, dict) else {}


def yaml_file() -> Path | None:
    """The YAML settings file: CAIRN_CONFIG (which must exist), else ./cairn.yaml if any."""
    named = os.environ.get("CAIRN_CONFIG")
    if named:
        path = Path(named)
        if not path.is_file():
            raise ConfigError(f"CAIRN_CONFIG names {named!r}, which is not a file")
        return path
    path = Path.cwd() / config_yaml.FILE_NAME
    return path if path.is_file() else None


def _files() -> dict[str, tuple[object, str]]:
    """Each setting the files give, with where: cairn.yaml's keys over [tool.cairn]'s."""
    found: dict[str, tuple[object, str]] = {
        key: (value, f"[tool.cairn] {key}") for key, value in _pyproject().items()
    }
    path = yaml_file()
    if path is not None:
        shown = path.name if path.parent == Path.cwd() else str(path)
        for key, value in config_yaml.load(path).items():
            found[key] = (value, f"{shown} {key}")
    return found


def _from_files(name: str) -> tuple[object, str]:
    """A setting's value in the files (None if neither gives it) and where it came from."""
    return _files().get(name, (None, f"[tool.cairn] {name}"))


def database_url(explicit: str | None = None) -> str:
    """The database URL: argument, else CAIRN_DATABASE_URL, else the files' url, else default.

    The files: cairn.yaml (url, or pyworkflow's storage), else [tool.cairn] url.
    """
    if explicit:
        return explicit
    env = os.environ.get("CAIRN_DATABASE_URL")
    if env:
        return env
    url, where = _from_files("url")
    if url is None or url == "":
        return DEFAULT_URL
    if not isinstance(url, str) or not url:
        raise ConfigError(f"{where} must be a database URL, got {url!r}")
    return url


def broker_url(explicit: str | None = None) -> str | None:
    """cairn.celery's broker: argument, else CAIRN_BROKER_URL, else the files' broker_url."""
    if explicit:
        return explicit
    env = os.environ.get("CAIRN_BROKER_URL")
    if env:
        return env
    url, where = _from_files("broker_url")
    if url is not None and (not isinstance(url, str) or not url):
        raise ConfigError(f"{where} must be a broker URL, got {url!r}")
    return url or None


def modules(explicit: tuple[str, ...] | list[str] = ()) -> tuple[str, ...]:
    """Workflow modules to import: argument, else CAIRN_MODULES (comma list), else the files."""
    if explicit:
        return tuple(explicit)
    env = os.environ.get("CAIRN_MODULES")
    if env:
        return tuple(m.strip() for m in env.split(",") if m.strip())
    found, where = _from_files("modules")
    if found is None:
        return ()
    if isinstance(found, str):
        return (found,)
    if isinstance(found, list) and all(isinstance(m, str) for m in found):
        return tuple(found)
    raise ConfigError(f"{where} must be a list of module names")


def dashboard_token(explicit: str | None = None) -> str | None:
    """The dashboard's bearer token: argument, else CAIRN_DASHBOARD_TOKEN, else None."""
    if explicit:
        return explicit
    return os.environ.get("CAIRN_DASHBOARD_TOKEN") or None


def keys_setting() -> tuple[str, str, str | None] | None:
    """The encryption keys' text, where it came from, and CAIRN_CURRENT_KEY; None if unset.

    CAIRN_KEYS holds the keys themselves; else CAIRN_KEYS_FILE names a file holding them
    (see cairn/codecs/keys.py for the form).
    """
    current = os.environ.get("CAIRN_CURRENT_KEY") or None
    text = os.environ.get("CAIRN_KEYS")
    if text:
        return text, "CAIRN_KEYS", current
    named = os.environ.get("CAIRN_KEYS_FILE")
    if not named:
        return None
    try:
        return Path(named).read_text(encoding="utf-8"), f"CAIRN_KEYS_FILE {named}", current
    except OSError as exc:
        raise ConfigError(f"CAIRN_KEYS_FILE names {named!r}, which cannot be read: {exc}") from None


def known_workers_window(explicit: object = None) -> float:
    """Seconds a worker's workflows stay known after it was last seen, for starts by name.

    Argument, else CAIRN_KNOWN_WORKERS_WINDOW, else the files' known_workers_window,
    else 7 days; a duration ("7d", "12h", seconds). ConfigError names a bad one.
    """
    value: object = explicit
    where = "known_workers_window"
    if value is None:
        value = os.environ.get("CAIRN_KNOWN_WORKERS_WINDOW") or None
        where = "CAIRN_KNOWN_WORKERS_WINDOW"
    if value is None:
        value, where = _from_files("known_workers_window")
    if value is None:
        value = DEFAULT_KNOWN_WORKERS_WINDOW
    if isinstance(value, bool) or not isinstance(value, str | int | float | timedelta):
        raise ConfigError(f"{where} must be a duration such as '7d', got {value!r}")
    try:
        return durations.parse(value, what=where).total_seconds()
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def retention(explicit: object = None) -> float | None:
    """Seconds after which finished runs are deleted, or None to keep every run.

    Argument, else CAIRN_RETENTION, else [tool.cairn] retention, else None (keep
    everything); a duration ("30d", "12h", seconds). ConfigError names a bad one.
    """
    value, where = _setting(explicit, "retention")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int | float | timedelta):
        raise ConfigError(f"{where} must be a duration such as '30d', got {value!r}")
    try:
        seconds = durations.parse(value, what=where).total_seconds()
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if seconds <= 0:
        raise ConfigError(f"{where} must be longer than zero, got {value!r}")
    return seconds


@dataclass(frozen=True, slots=True)
class Limits:
    """How large a stored value and how long a run's history may grow (see docs/howto/retention.md).

    A value (workflow arguments, a step's result, an event's payload) past `warn_value_bytes`
    is logged; past `max_value_bytes` it is refused with SerializationError before anything
    is written. A history past `warn_history` entries is logged; a run whose history would
    pass `max_history` fails, pointing at continue_as_new.
    """

    warn_value_bytes: int = 256 * 1024
    max_value_bytes: int = 100 * 1024 * 1024
    warn_history: int = 10_000
    max_history: int = 50_000


_SIZE = re.compile(r"\s*(\d+)\s*(b|kb|kib|mb|mib|gb|gib)?\s*", re.IGNORECASE)
_SIZE_UNITS = {
    None: 1,
    "b": 1,
    "kb": 1000,
    "kib": 1024,
    "mb": 1000**2,
    "mib": 1024**2,
    "gb": 1000**3,
    "gib": 1024**3,
}


def parse_size(value: object, *, what: str) -> int:
    """Bytes from an int or a string such as "256KiB", "2MiB", "500kb"; ConfigError if bad."""
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and (match := _SIZE.fullmatch(value)):
        unit = match[2].lower() if match[2] else None
        number = int(match[1]) * _SIZE_UNITS[unit]
    else:
        raise ConfigError(
            f"{what} must be a size such as '2MiB' or a number of bytes, got {value!r}"
        )
    if number <= 0:
        raise ConfigError(f"{what} must be larger than zero, got {value!r}")
    return number


def _count(value: object, *, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"{what} must be a positive whole number, got {value!r}")
    return value


def limits(
    *,
    warn_value_size: object = None,
    max_value_size: object = None,
    warn_history: object = None,
    max_history: object = None,
) -> Limits:
    """The size and history limits: arguments, else CAIRN_* variables, else [tool.cairn].

    [tool.cairn] keys (and CAIRN_ variables, upper case): warn_value_size, max_value_size
    (sizes: "256KiB", "2MiB" or bytes), warn_history, max_history (entries). ConfigError
    names a bad one, or a warning threshold above its limit.
    """
    default = Limits()
    found: dict[str, int] = {}
    sizes = {"warn_value_size": warn_value_size, "max_value_size": max_value_size}
    for name, explicit in sizes.items():
        value, where = _setting(explicit, name)
        if value is not None:
            found[name] = parse_size(value, what=where)
    counts = {"warn_history": warn_history, "max_history": max_history}
    for name, explicit in counts.items():
        value, where = _setting(explicit, name)
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value)
        if value is not None:
            found[name] = _count(value, what=where)
    max_bytes = found.get("max_value_size", default.max_value_bytes)
    max_entries = found.get("max_history", default.max_history)
    # A limit set below the default warning lowers the warning with it.
    chosen = Limits(
        warn_value_bytes=found.get("warn_value_size", min(default.warn_value_bytes, max_bytes)),
        max_value_bytes=max_bytes,
        warn_history=found.get("warn_history", min(default.warn_history, max_entries)),
        max_history=max_entries,
    )
    if chosen.warn_value_bytes > chosen.max_value_bytes:
        raise ConfigError(
            f"warn_value_size ({chosen.warn_value_bytes} bytes) is above max_value_size "
            f"({chosen.max_value_bytes} bytes)"
        )
    if chosen.warn_history > chosen.max_history:
        raise ConfigError(
            f"warn_history ({chosen.warn_history}) is above max_history ({chosen.max_history})"
        )
    return chosen


def setting(explicit: object, name: str) -> tuple[object, str]:
    """A setting's value and where it came from: argument, CAIRN_NAME, [tool.cairn] name.

    (None, name) when it is set nowhere. For settings read elsewhere (blobs/).
    """
    return _setting(explicit, name)


def _setting(explicit: object, name: str) -> tuple[object, str]:
    """A setting's value and where it came from: argument, CAIRN_NAME, the files' name."""
    if explicit is not None:
        return explicit, name
    variable = f"CAIRN_{name.upper()}"
    env = os.environ.get(variable)
    if env:
        return env, variable
    return _from_files(name)


@dataclass(frozen=True, slots=True)
class Resources:
    """What the ready steps of `cairn.steps` reach by name: databases, the tag provider.

    `databases` maps a name to a SQLAlchemy URL (or an SQLAlchemy Engine given in code);
    `tags` is a provider URL ("opcua://host:4840"), a "module:attribute" path to a
    provider object, a provider object, or None when none is set.
    """

    databases: Mapping[str, Any] = field(default_factory=dict)
    tags: Any = None


def resources(databases: Mapping[str, Any] | None = None, tags: Any = None) -> Resources:
    """The step library's resources: arguments over the files' `databases` and `tags`.

    The files: cairn.yaml's `databases:` and `tags:`, else `[tool.cairn.databases]` and
    `[tool.cairn.tags]`. A database given as an argument replaces the one of the same
    name there; `tags` replaces the files' `tags` provider. A string value "env:NAME" is read from
    the environment variable NAME (so no password need be written in pyproject.toml).

    Raises:
        ConfigError: A section of the wrong shape, a name that is not a non-empty string,
            or an "env:" variable that is not set; each named.
    """
    section = _files()
    found: dict[str, Any] = {}
    listed, where = section.get("databases", ({}, ""))
    where = _table(where, "databases")
    if not isinstance(listed, dict):
        raise ConfigError(f"{where} must be a table of name = URL")
    for name, url in listed.items():
        if not isinstance(url, str) or not url:
            raise ConfigError(f"{where} {name} must be a URL string, got {url!r}")
        found[name] = url
    if databases is not None:
        if not isinstance(databases, Mapping):
            raise ConfigError(f"databases must be a dict of name -> URL, got {databases!r}")
        found.update(databases)
    for name, url in found.items():
        if not isinstance(name, str) or not name:
            raise ConfigError(f"a database name must be a non-empty string, got {name!r}")
        if url is None or url == "":
            raise ConfigError(f"database {name!r} has no URL")
        found[name] = _from_env(url, f"database {name!r}")
    if tags is None:
        table, where = section.get("tags", ({}, ""))
        where = _table(where, "tags")
        if not isinstance(table, dict):
            raise ConfigError(f'{where} must be a table: provider = "opcua://host:4840"')
        tags = table.get("provider")
        if tags is not None and (not isinstance(tags, str) or not tags):
            raise ConfigError(f"{where} provider must be a string, got {tags!r}")
    return Resources(databases=found, tags=_from_env(tags, "the tag provider"))


def _table(where: str, name: str) -> str:
    """How to name the table `name` in messages: `[tool.cairn.name]`, or cairn.yaml's key."""
    return where if where and not where.startswith("[tool.cairn]") else f"[tool.cairn.{name}]"


def _from_env(value: Any, what: str) -> Any:
    """`value`, or the environment variable it names as "env:NAME"."""
    if not isinstance(value, str) or not value.startswith("env:"):
        return value
    variable = value[len("env:") :]
    found = os.environ.get(variable)
    if not found:
        raise ConfigError(f"{what} is read from ${variable}, which is not set")
    return found
