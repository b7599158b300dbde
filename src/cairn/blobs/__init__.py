"""Offloaded values: stored texts over `inline_limit` kept in a blob store, by reference.

The package, by concern: `offloaded` (the outermost serializer layer: offload on write,
fetch and check on read), `reference` (what the history keeps: size, sha256, media
type; BlobError), `stores` (the BlobStore seam, a directory of files, memory), `s3` (an
S3-compatible store, the `s3` extra), `sweep` (a prune's second half: delete the blobs
no stored value references). The engine installs it with `offloading` (see
runtime/engine.py); docs/howto/large-values.md tells the story.
"""

from __future__ import annotations

from collections.abc import Awaitable
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from cairn import config
from cairn.blobs.offloaded import Offloaded
from cairn.blobs.reference import BlobError, BlobStoreUnavailable, BlobUnwritable, Reference
from cairn.blobs.stores import BlobStore, BlobStoreRefused, FileBlobs, MemoryBlobs
from cairn.errors import ConfigError
from cairn.serialization import Serializer

__all__ = [
    "BlobError",
    "BlobStore",
    "BlobStoreRefused",
    "BlobStoreUnavailable",
    "BlobUnwritable",
    "FileBlobs",
    "MemoryBlobs",
    "Offloaded",
    "Reference",
    "configured",
    "dumps_async",
    "inline_limit",
    "loads_async",
    "offloading",
    "open_blobs",
    "shown",
    "store_of",
    "whole",
]

INLINE_LIMIT = 256 * 1024  # bytes: a stored text past this goes to the blob store


def inline_limit(explicit: object = None) -> int:
    """`inline_limit`: argument, else CAIRN_INLINE_LIMIT, else the files, else 256 KiB."""
    value, where = config.setting(explicit, "inline_limit")
    return INLINE_LIMIT if value is None else config.parse_size(value, what=where)


def open_blobs(url: str, *, what: str = "blobs") -> BlobStore:
    """The blob store a URL names: file:///dir, a plain path, s3://bucket/prefix, memory:."""
    if not isinstance(url, str) or not url.strip():
        raise ConfigError(f"{what} must be a URL such as 'file:///srv/cairn-blobs', got {url!r}")
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "file":
        if parts.netloc not in ("", "localhost") or not parts.path:
            raise ConfigError(f"{what} {url!r} must name a local directory: file:///path/to/dir")
        return FileBlobs(unquote(parts.path))
    if scheme == "":
        return FileBlobs(url)
    if scheme == "memory":
        return MemoryBlobs()
    if scheme == "s3":
        from cairn.blobs.s3 import S3Blobs

        found: BlobStore = S3Blobs.from_url(url, what=what)
        return found
    raise ConfigError(
        f"{what} {url!r} is not a blob store URL (file:///dir, s3://bucket/prefix, memory:)"
    )


def default_blobs(store: object) -> BlobStore | None:
    """Where an engine without `blobs=` keeps blobs: beside its SQLite file, or nowhere.

    A SQLite file `cairn.db` keeps them in the directory `cairn.db.blobs`; an in-memory
    database in memory; a PostgreSQL database has no default (its workers may be on
    several machines: name a directory they share, or an S3 bucket).
    """
    path = getattr(store, "path", None)
    if not isinstance(path, str):
        return None
    if getattr(store, "_memory", False) or path == ":memory:":
        return MemoryBlobs()
    return FileBlobs(Path(path).with_name(Path(path).name + ".blobs"))


def offloading(
    serializer: Serializer,
    store: object,
    *,
    inline: object = None,
    blobs: object = None,
    warn: int | None = None,
) -> Offloaded:
    """`serializer` with texts over the inline limit kept in the configured blob store.

    `inline` and `blobs` are the Engine's arguments; unset, CAIRN_INLINE_LIMIT /
    CAIRN_BLOBS, then `[tool.cairn]` / cairn.yaml, then the defaults (256 KiB; beside
    the SQLite file). ConfigError (one line) names a bad setting. `warn`: the
    warn_value_size in bytes (None: no warnings; see `Offloaded`).
    """
    return Offloaded(serializer, configured(store, blobs), inline_limit(inline), warn_above=warn)


def configured(store: object, blobs: object = None) -> BlobStore | None:
    """The blob store `blobs` names, else CAIRN_BLOBS, the files, else the default."""
    url, where = config.setting(blobs, "blobs")
    return default_blobs(store) if url is None else open_blobs(url, what=where)  # type: ignore[arg-type]


def store_of(serializer: Serializer) -> BlobStore | None:
    """The blob store an engine's serializer keeps offloaded values in, or None."""
    return serializer.blobs if isinstance(serializer, Offloaded) else None


def dumps_async(serializer: Serializer, value: Any, *, what: str) -> Awaitable[str]:
    """`serializer.dumps` for the event loop: a large value's blob written in a thread."""
    if isinstance(serializer, Offloaded):
        return serializer.dumps_async(value, what=what)
    return _ready(serializer.dumps(value, what=what))


def loads_async(serializer: Serializer, text: str) -> Awaitable[Any]:
    """`serializer.loads` for the event loop: an offloaded value read in a thread."""
    if isinstance(serializer, Offloaded):
        return serializer.loads_async(text)
    return _ready(serializer.loads(text))


async def _ready(value: Any) -> Any:
    return value


def shown(serializer: Serializer, text: str) -> dict[str, object] | None:
    """What people see of an offloaded stored text (size, hash, preview), else None.

    For history entries and a run's arguments and result as the CLI, dashboard and
    `engine.history` show them: a 50 MiB value is not read whole to be shown.
    """
    return serializer.shown(text) if isinstance(serializer, Offloaded) else None


def whole(serializer: Serializer, text: str) -> str:
    """A stored text in full: an offloaded one fetched and hash-checked, else as it is."""
    return serializer.whole(text) if isinstance(serializer, Offloaded) else text
