"""Where offloaded values live: a directory of files, or this process's memory.

A blob store keeps bytes under their sha256 (content-addressed: the same value stored
twice is one blob) and has four operations: `put` (durable when it returns), `get`
(the bytes, or None when there is no such blob), `head` (the first bytes, for a
preview) and, for the prune, `listing` and `delete`. The S3-compatible store is in
blobs/s3.py. Hashes are checked by the caller (blobs/offloaded.py), not here.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol


class BlobStoreRefused(OSError):
    """A blob store that will refuse every write until someone fixes it (see blobs/s3.py).

    Bad credentials, no such bucket, access denied: unlike a full disk or a lost
    connection, waiting does not help, so a step whose result it refuses fails at once,
    in one line naming the store and the error (blobs/offloaded.py).
    """


class BlobStoreGone(OSError):
    """A file blob store's directory is not there, not a directory, or empty.

    Its filesystem unmounted, or the path moved: not one blob lost but the whole store
    out of reach, which putting it back fixes. So a read waits for it, as for an S3
    bucket out of reach (blobs/offloaded.py), instead of failing runs for good.
    """


class BlobStore(Protocol):
    """The narrow seam every blob store fills (see the module docstring)."""

    where: str  # for messages: "file:///srv/cairn-blobs", "memory"

    def put(self, sha256: str, data: bytes) -> None:
        """Keep `data` under `sha256`, durably, before returning (a no-op if kept).

        OSError if it cannot now (full, unwritable, away: the caller may try again);
        BlobStoreRefused if it never will until the store's setup is fixed.
        """
        ...

    def get(self, sha256: str) -> bytes | None:
        """The bytes kept under `sha256`, or None if there are none."""
        ...

    def head(self, sha256: str, size: int) -> bytes | None:
        """At most the first `size` bytes kept under `sha256`, or None."""
        ...

    def listing(self) -> Iterator[tuple[str, float]]:
        """Every blob kept: its sha256 and when it was written (seconds since the epoch)."""
        ...

    def delete(self, sha256: str, *, written_before: float) -> None:
        """Forget the blob `sha256` unless written (or `put` again) since `written_before`.

        No error if it is gone already.
        """
        ...


class FileBlobs:
    """Blobs as files `<directory>/<sha[:2]>/<sha>`, written atomically.

    A blob is written to a temporary file in the same directory, flushed to disk
    (fsync), then renamed into place and its directory synced: a crash at any point
    leaves either the whole blob or none (at most a stray `.tmp` file, which the prune
    removes). The directory is made owner-only on first use, as the SQLite file is.
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self.where = self.directory.as_uri() if self.directory.is_absolute() else str(directory)

    def __repr__(self) -> str:
        return f"FileBlobs({str(self.directory)!r})"

    def path(self, sha256: str) -> Path:
        """Where the blob `sha256` is (or would be) kept."""
        return self.directory / sha256[:2] / sha256

    def put(self, sha256: str, data: bytes) -> None:
        """Write `data` under `sha256`: temporary file, fsync, rename, fsync the directory."""
        target = self.path(sha256)
        try:  # content-addressed: the same bytes are there; fresh again for the prune
            found = os.stat(target)
            # Unless what is there is not the whole blob (a truncated file, a directory):
            # written again (a directory in its place fails the rename, and is waited out).
            if stat.S_ISREG(found.st_mode) and found.st_size == len(data):
                os.utime(target)
                return
        except FileNotFoundError:
            pass
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        import tempfile  # with shutil, bz2 and lzma: loaded by the first blob written

        fd, temporary = tempfile.mkstemp(
            dir=target.parent, prefix=f".{sha256[:16]}.", suffix=".tmp"
        )
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
        _sync_directory(target.parent)

    def get(self, sha256: str) -> bytes | None:
        """The blob's bytes, or None if there is no such file (see `_read` for errors)."""
        return self._read(sha256, None)

    def head(self, sha256: str, size: int) -> bytes | None:
        """The blob's first `size` bytes, or None (see `_read` for errors)."""
        return self._read(sha256, size)

    def _read(self, sha256: str, size: int | None) -> bytes | None:
        """The blob's bytes (at most `size`), or None if its file is not there.

        BlobStoreGone if the store's directory is not there, not a directory or empty
        (unmounted?): the store is out of reach, not the blob lost. BlobStoreRefused if
        something other than a file is where the blob should be (a directory, or a file
        where its directory should be): the store is damaged there until someone fixes
        it. Other OSErrors (EIO, a stale NFS handle) are raised as they are.
        """
        path = self.path(sha256)
        try:
            with path.open("rb") as found:
                return found.read() if size is None else found.read(size)
        except FileNotFoundError:
            self._check_there()
            return None
        except (IsADirectoryError, NotADirectoryError) as exc:
            self._check_there()
            raise BlobStoreRefused(
                f"{path} is not a blob file ({exc.strerror}); something else is in its place"
            ) from exc

    def _check_there(self) -> None:
        """BlobStoreGone unless the store's directory is there and holds something."""
        try:
            with os.scandir(self.directory) as entries:
                if next(entries, None) is not None:
                    return
            problem = "is empty (is its filesystem mounted?)"
        except FileNotFoundError:
            problem = "is not there (is its filesystem mounted?)"
        except NotADirectoryError:
            problem = "is not a directory"
        raise BlobStoreGone(f"the blob store directory {self.directory} {problem}")

    def listing(self) -> Iterator[tuple[str, float]]:
        """Every blob file and every stray temporary file (named by its path's stem)."""
        if not self.directory.is_dir():
            return
        for sub in self.directory.iterdir():
            if not sub.is_dir() or len(sub.name) != 2:
                continue
            for item in sub.iterdir():
                with contextlib.suppress(FileNotFoundError):
                    yield item.name, item.stat().st_mtime

    def delete(self, sha256: str, *, written_before: float) -> None:
        """Remove the blob's file (or a stray temporary file, named by its file name)."""
        if sha256.endswith(".tmp"):
            found = self.directory / sha256[1:3] / sha256
        else:
            found = self.path(sha256)
        with contextlib.suppress(FileNotFoundError):
            # Stat again: a `put` of the same value since the listing keeps it.
            if found.stat().st_mtime < written_before:
                found.unlink()


def _sync_directory(directory: Path) -> None:
    """Make a rename in `directory` durable (POSIX; a no-op where it cannot be done)."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class MemoryBlobs:
    """Blobs in this process's memory: for in-memory databases (TestEngine, `memory:`)."""

    where = "memory"

    def __init__(self) -> None:
        self.blobs: dict[str, tuple[bytes, float]] = {}

    def put(self, sha256: str, data: bytes) -> None:
        """Keep `data`."""
        self.blobs[sha256] = (data, time.time())

    def get(self, sha256: str) -> bytes | None:
        """The bytes, or None."""
        found = self.blobs.get(sha256)
        return None if found is None else found[0]

    def head(self, sha256: str, size: int) -> bytes | None:
        """The first `size` bytes, or None."""
        found = self.get(sha256)
        return None if found is None else found[:size]

    def listing(self) -> Iterator[tuple[str, float]]:
        """Every blob kept and when."""
        for sha256, (_, written) in list(self.blobs.items()):
            yield sha256, written

    def delete(self, sha256: str, *, written_before: float) -> None:
        """Forget it, unless kept again since `written_before`."""
        found = self.blobs.get(sha256)
        if found is not None and found[1] < written_before:
            del self.blobs[sha256]
