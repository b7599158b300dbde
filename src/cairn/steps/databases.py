"""The application's databases by name: one SQLAlchemy engine (and pool) per URL and process.

Engines are made on first use and kept, so steps share their connections; a forked
process makes its own. What a database error means for a step (retry or give up) is
decided here too.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any

from cairn.steps import calling
from cairn.steps.errors import DatabaseError, DatabaseUnavailable

if TYPE_CHECKING:
    import sqlalchemy

__all__ = ["CONNECT_TIMEOUT", "dispose", "engine", "failure", "first_line"]

# Drivers used when a URL names none: the pure-Python ones cairn's extras install.
_DEFAULT_DRIVERS = {"postgresql": "psycopg", "postgres": "psycopg", "mysql": "pymysql"}
_DEFAULT_DRIVERS["mariadb"] = "pymysql"
# SQLSTATE classes worth a retry: 08 connection exception, 40 transaction rollback
# (serialization failure, deadlock), 57P0x server shutting down.
_RETRY_SQLSTATES = ("08", "40", "57P0")
# MySQL/MariaDB error numbers worth a retry: lock wait timeout, deadlock, server gone.
_RETRY_MYSQL = frozenset({1205, 1213, 2002, 2003, 2006, 2013})

CONNECT_TIMEOUT = 10
"""Seconds a new connection (PostgreSQL, MySQL, MariaDB) may take, unless its URL says."""

_engines: dict[tuple[int, str], sqlalchemy.Engine] = {}
_lock = threading.Lock()


def engine(name: str) -> sqlalchemy.Engine:
    """The engine of the database called `name`, made on first use in this process.

    Raises:
        DatabaseError: No database of that name, a bad URL, or a missing driver.
    """
    configured = calling.resources().databases
    if name not in configured:
        known = ", ".join(sorted(configured)) or "none"
        raise DatabaseError(
            f"no database named {name!r} (configured: {known}); name it in "
            "[tool.cairn.databases] or Engine(databases={...})",
            database=name,
        )
    target = configured[name]
    if not isinstance(target, str):
        return _given(name, target)
    key = (os.getpid(), target)
    made = _engines.get(key)
    if made is not None:
        return made
    with _lock:
        made = _engines.get(key)
        if made is None:
            made = _engines[key] = _create(name, target)
    return made


def backend(name: str) -> str | None:
    """The backend of the database called `name` ("sqlite", "postgresql", ...), if known.

    Read from its URL's scheme (or its Engine), without connecting; None when no database
    has that name.
    """
    target = calling.resources().databases.get(name)
    if isinstance(target, str):
        scheme = target.partition(":")[0].partition("+")[0].lower()
        return "postgresql" if scheme == "postgres" else scheme
    dialect = getattr(target, "dialect", None)
    return getattr(dialect, "name", None)


def dispose() -> None:
    """Close every pooled connection this process holds and forget the engines."""
    with _lock:
        made = [e for (pid, _), e in _engines.items() if pid == os.getpid()]
        _engines.clear()
    for each in made:
        each.dispose()


def failure(name: str, exc: Exception, *, connecting: bool = False) -> Exception:
    """The step error for SQLAlchemy's `exc` on database `name`: retried or not.

    An error while `connecting` is always worth a retry (the server may be restarting);
    one from a statement only when it says so (a lost connection, a deadlock...).
    """
    import sqlalchemy.exc

    text = first_line(exc)
    if connecting and isinstance(exc, sqlalchemy.exc.DBAPIError):
        return DatabaseUnavailable(f"database {name!r}: cannot connect: {text}", database=name)
    if isinstance(exc, sqlalchemy.exc.DBAPIError) and _retryable(exc):
        return DatabaseUnavailable(f"database {name!r}: {text}", database=name)
    return DatabaseError(f"database {name!r}: {text}", database=name)


def _given(name: str, target: Any) -> sqlalchemy.Engine:
    import sqlalchemy

    if not isinstance(target, sqlalchemy.Engine):
        raise DatabaseError(
            f"database {name!r} must be a URL or an SQLAlchemy Engine, got {type(target).__name__}",
            database=name,
        )
    return target


def _create(name: str, url: str) -> sqlalchemy.Engine:
    import sqlalchemy
    import sqlalchemy.exc

    try:
        parsed = sqlalchemy.make_url(url)
    except sqlalchemy.exc.ArgumentError:
        raise DatabaseError(
            f"database {name!r}: cannot read the URL {_hide_password(url)!r} (write it as "
            "dialect[+driver]://user:password@host/database)",
            database=name,
        ) from None
    shown = parsed.render_as_string(hide_password=True)
    if "+" not in parsed.drivername and parsed.drivername in _DEFAULT_DRIVERS:
        parsed = parsed.set(drivername=f"{parsed.drivername}+{_DEFAULT_DRIVERS[parsed.drivername]}")
    if parsed.get_backend_name() == "sqlite" and parsed.database in (None, "", ":memory:"):
        raise DatabaseError(
            f"database {name!r}: an in-memory SQLite database ({shown}) would be a different "
            "one on each connection; use a file: sqlite:///app.db",
            database=name,
        )
    try:
        # No pre-ping: on a silent connection it would hang before any limit applies. A
        # connection the server dropped fails at the first thing an attempt sends, which
        # then takes a fresh one (db._execute).
        return sqlalchemy.create_engine(parsed, connect_args=_connect_args(parsed))
    except sqlalchemy.exc.NoSuchModuleError:
        raise DatabaseError(
            f"database {name!r}: SQLAlchemy has no dialect {parsed.drivername!r} ({shown})",
            database=name,
        ) from None
    except ImportError as exc:
        raise DatabaseError(
            f"database {name!r}: the driver for {parsed.drivername!r} is not installed "
            f"({exc.name or exc}); pip install it",
            database=name,
        ) from None
    except (sqlalchemy.exc.ArgumentError, TypeError, ValueError) as exc:
        raise DatabaseError(f"database {name!r}: bad URL {shown}: {exc}", database=name) from None


def _connect_args(url: sqlalchemy.URL) -> dict[str, Any]:
    """A bound on connecting (to a server that accepts, then says nothing), unless given."""
    if "connect_timeout" in url.query:
        return {}
    if url.drivername in ("postgresql+psycopg", "mysql+pymysql", "mariadb+pymysql"):
        return {"connect_timeout": CONNECT_TIMEOUT}
    return {}


def _retryable(exc: Any) -> bool:
    if getattr(exc, "connection_invalidated", False):
        return True
    orig = getattr(exc, "orig", None)
    state = getattr(orig, "sqlstate", None) or getattr(
        getattr(orig, "diag", None), "sqlstate", None
    )
    if isinstance(state, str) and state.startswith(_RETRY_SQLSTATES):
        return True
    code = orig.args[0] if orig is not None and getattr(orig, "args", None) else None
    if isinstance(code, int) and code in _RETRY_MYSQL:
        return True
    return "database is locked" in str(orig)  # SQLite, busy past its timeout


def first_line(exc: BaseException) -> str:
    """The first line of what the driver said (SQLAlchemy's wrapper left out)."""
    exc = getattr(exc, "orig", None) or exc
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _hide_password(url: str) -> str:
    head, at, tail = url.rpartition("@")
    if not at or "://" not in head:
        return url
    scheme, _, credentials = head.partition("://")
    user = credentials.partition(":")[0]
    return f"{scheme}://{user}:***@{tail}"
