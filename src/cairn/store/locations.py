"""The `memory://` and `file:///dir` URLs: where on the SQLite backend each one lives.

`memory://` is one in-memory SQLite database per process, shared by every store opened
on it there and dropped when the last of them closes; `file:///dir` is the SQLite file
`dir/cairn.db`. This module parses and describes them, and hides the password of any
database URL shown in a message; it opens nothing.
"""

from __future__ import annotations

import os
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from cairn.errors import ConfigError

MEMORY_URL = "memory://"
FILE_NAME = "cairn.db"  # the one file a file:///dir store keeps in its directory


def scheme(url: str) -> str:
    """The URL's scheme in lower case ("" if it has none)."""
    return urlsplit(url).scheme.lower()


def memory_path(url: str) -> str:
    """The SQLite URI of this process's in-memory database, for `memory://`.

    SQLite's memdb VFS shares a database whose name starts with "/" among the
    connections of one process (SQLITE_BUSY and busy_timeout work as on a file) and
    frees it when the last one closes. The process id in the name keeps a forked child
    from reading the copy of its parent's database it inherited.
    """
    parts = urlsplit(url)
    if parts.netloc or parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ConfigError(
            f"invalid memory URL {url!r}: memory:// takes nothing after it "
            "(it is this process's one in-memory store)"
        )
    import sqlite3  # not at import: a PostgreSQL process never needs the module

    if sqlite3.sqlite_version_info < (3, 36):
        raise ConfigError(
            f"memory:// needs SQLite 3.36 or newer (its memdb VFS); this Python has "
            f"{sqlite3.sqlite_version}: use sqlite:///:memory: (one engine's own database)"
        )
    return f"file:/cairn-memory-{os.getpid()}?vfs=memdb"


def file_directory(url: str) -> str:
    """The absolute directory of a `file:///dir` URL; ConfigError names a bad one."""
    parts = urlsplit(url)
    if parts.netloc not in ("", "localhost"):
        raise ConfigError(
            f"invalid file URL {url!r}: it names host {parts.netloc!r}; "
            "use file:///absolute/directory"
        )
    path = unquote(parts.path)
    if parts.query or parts.fragment:
        raise ConfigError(f"invalid file URL {url!r}: it takes no '?' or '#' part")
    if not path:
        raise ConfigError(f"invalid file URL {url!r}: no directory (use file:///absolute/dir)")
    if not os.path.isabs(path):
        raise ConfigError(
            f"invalid file URL {url!r}: the directory must be absolute (file:///absolute/dir)"
        )
    if os.path.isfile(path):
        raise ConfigError(
            f"invalid file URL {url!r}: {path!r} is a file, not a directory "
            f"(file:// names a directory that holds {FILE_NAME}; sqlite:///{path} "
            "opens that file itself)"
        )
    return path


def file_path(url: str) -> str:
    """The SQLite file of a `file:///dir` store: `dir/cairn.db`."""
    return os.path.join(file_directory(url), FILE_NAME)


def refuse_memory(url: str, what: str) -> None:
    """ConfigError if `url` is memory://, which `what` (needing other processes) cannot use."""
    if scheme(url) == "memory":
        raise ConfigError(
            f"{what} needs a database other processes can open, and {url!r} is this "
            "process's own: use file:///directory, sqlite:///file.db or postgresql://..."
        )


def describe(url: str, shown: str) -> str:
    """`shown` (the URL as printable) with, for memory:// and file://, what it opens."""
    kind = scheme(url)
    if kind == "memory":
        return f"{shown} (in memory: this process only, gone when it exits)"
    if kind == "file":
        return f"{shown} (SQLite file {file_path(url)})"
    return shown


def redact(url: str) -> str:
    """`url` without a password (in the user part or the query), for messages."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if parts.password is not None:
        netloc = f"{parts.username or ''}@{netloc.rpartition('@')[2]}"
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query) if k.lower() != "password"])
    return urlunsplit(parts._replace(netloc=netloc, query=query))
