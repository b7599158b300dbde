"""What the history keeps of an offloaded value: its size, sha256 and media type.

A reference is itself a compact JSON text, ``{"__cairn__":"blob","sha256":...}``, always
starting with `PREFIX`, so a reader tells it from an ordinary stored text by one
`startswith`, and a prune finds every reference in the database by one `LIKE`. A user
value can never be stored as this text: the serializers escape a dict holding
``"__cairn__"`` of their own (see serialization/tagged.py).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from cairn.errors import SerializationError, StoreUnavailable
from cairn.observability import logcontext

PREFIX = '{"__cairn__":"blob",'
"""How every reference text starts (and no other stored text does)."""

MARK = '"__cairn__":"blob"'
"""What a text holding a reference anywhere holds (a prune's LIKE, a list of messages)."""

_HASH = re.compile(r'"sha256":"([0-9a-f]{64})"')


@dataclass(frozen=True, slots=True)
class Reference:
    """An offloaded value: `size` bytes of stored text whose sha256 is `sha256`."""

    sha256: str
    size: int
    media_type: str

    def text(self) -> str:
        """The reference as the history stores it."""
        return (
            f'{PREFIX}"sha256":"{self.sha256}","size":{self.size},'
            f'"media_type":{json.dumps(self.media_type)}}}'
        )

    def as_dict(self) -> dict[str, Any]:
        """What the CLI and dashboard show of it (with a preview added by the caller)."""
        return {"sha256": self.sha256, "size": self.size, "media_type": self.media_type}


def of(data: bytes, media_type: str) -> Reference:
    """The reference of the stored bytes `data`."""
    return Reference(hashlib.sha256(data).hexdigest(), len(data), media_type)


def offloaded(text: str | None) -> bool:
    """Whether the stored text `text` is a reference (a value kept in the blob store)."""
    return text is not None and text.startswith(PREFIX)


def parse(text: str) -> Reference:
    """The reference `text` (which starts with PREFIX); BlobError if it is malformed."""
    try:
        found = json.loads(text)
        sha, size, media = found["sha256"], found["size"], found["media_type"]
        if not (isinstance(sha, str) and _HASH.fullmatch(f'"sha256":"{sha}"')):
            raise ValueError(sha)
        return Reference(sha, int(size), str(media))
    except (ValueError, KeyError, TypeError) as exc:
        raise BlobError(f"malformed blob reference {text[:200]!r}", blob="") from exc


def hashes_in(text: str) -> set[str]:
    """Every blob hash a stored text references (one, or several in a list of messages)."""
    return set(_HASH.findall(text)) if MARK in text else set()


class BlobError(SerializationError):
    """An offloaded value could not be read back: its blob is missing or corrupt.

    The message names the run (the one executing in this context, if any), the step
    whose result it is (when the journal knows it, see `of_step`), the blob (its
    sha256, and the blob store) and what to do (`fix`, then retry the run). Not retried:
    the same read fails again until an operator restores the blob.
    """

    def __init__(
        self,
        detail: str,
        *,
        blob: str,
        what: str = "",
        run: str | None = None,
        step: str | None = None,
        fix: str = "",
    ) -> None:
        self.detail = detail
        self.blob = blob
        self.run = logcontext.current_run_id() if run is None else run
        self.step = step
        self.fix = fix
        where = [f"run {self.run!r}"] if self.run is not None else []
        where += [f"result of step {step!r}"] if step is not None else []
        todo = ""
        if fix:
            again = f", then retry the run (cairn runs retry {self.run})" if self.run else ""
            todo = f"; {fix}{again}"
        super().__init__(": ".join([*where, detail]) + todo, what=what, type_name="blob")

    def of_step(self, key: str) -> BlobError:
        """The same error, naming the step (its history key) whose result it is."""
        return BlobError(
            self.detail, blob=self.blob, what=self.what, run=self.run, step=key, fix=self.fix
        )


class BlobStoreUnavailable(StoreUnavailable):
    """The blob store did not answer a read for now (no connection, a 5xx, throttled).

    Unlike BlobError, neither the value's fault nor for good: the same read may succeed
    once the store answers. A run's attempt waits it out (core/durable.py `fetched`);
    elsewhere (`cairn runs show`, the API) it is StoreUnavailable naming the blob store
    (`where`), the blob and `reason`, the error's code or class (`public`: no host, which
    only the message and the log carry).
    """

    def __init__(
        self, detail: str, *, where: str, blob: str, reason: str, message: str | None = None
    ) -> None:
        run = logcontext.current_run_id()
        head = f"run {run!r}: " if run is not None else ""
        super().__init__(
            message
            or f"{head}cannot read blob {blob} from {where} for now: {detail}; "
            "try again once the blob store answers"
        )
        self.where = where
        self.blob = blob
        self.reason = reason
        self.detail = detail
        self.public = (
            f"the blob store {where} did not answer ({reason}): blob {blob} cannot be "
            "read for now; try again once it answers"
        )


RESTORE = "restore the blob from a backup of the blob store"
"""What to do about a blob missing, corrupt or with something else in its place."""

SET_UP = "fix the blob store's setup (its bucket, credentials or permissions)"
"""What to do about a blob store that refuses to give a blob back."""


WAITING = "blob store:"
"""How a run's `waiting_for` starts while an attempt of it waits for the blob store."""


READING = "cannot read blob "
"""How the reason of a run waiting for the blob store to give back a value starts."""


def reading_note(exc: BlobStoreUnavailable) -> str:
    """What a run waits for while its attempt waits for the blob store to answer a read."""
    return f"{WAITING}{READING}{exc.blob} from {exc.where}: {exc.detail}"


class BlobUnwritable(SerializationError):
    """The blob store did not take a blob (full, unwritable, away): not the value's fault.

    Outside a run the caller is told (nothing was stored; it may try again). In a run, the
    attempt that stores the value tries again until the store takes it (core/durable.py),
    and the run's `waiting_for` says so meanwhile (`waiting_for`).
    """

    def __init__(
        self,
        message: str,
        *,
        what: str = "",
        type_name: str = "",
        where: str = "",
        reason: str = "",
    ) -> None:
        super().__init__(message, what=what, type_name=type_name)
        # For the API's 503 (dashboard/api/replies.py): the store and the error's code or
        # class, without the host the message may carry.
        self.public = (
            f"cannot store {what} for now: the blob store {where} did not take it ({reason}); "
            "nothing was stored: try again once it does"
        )

    def waiting_for(self) -> str:
        """What the run waits for while its attempt waits out this refusal (one line)."""
        return WAITING + str(self).replace("\n", " ")
