"""The outermost serializer layer: a text over `inline_limit` goes to the blob store.

What the inner layers (the serializer, the size check, any codec) produce is stored as
it is when it is small: one length check, nothing else, so small values cost what they
did. A larger text is written to the blob store under its sha256 first, and the history
keeps the reference (blobs/reference.py) instead: the blob is durable before the
checkpoint that names it is written, because `dumps` returns only once `put` has.

A text over `warn_value_size` is logged here, where it is known whether it stays inline
(logged each time: every replay reads it with the history) or is offloaded (the designed
path for large values: logged once per value name, such as a step's results).

Reading back, a reference is resolved and its bytes checked against the hash before the
inner layers see them: a missing or corrupt blob raises BlobError naming the blob (and
the run). A list of stored texts put together without decoding them
(`serialization.encoded_list`, a `receive` of several messages) may hold references as
its items: those are resolved one by one.

`dumps_async` and `loads_async`, for callers on the event loop, do the same with a large
value's blob I/O in a thread: writing (hash, file write and fsync, or a PUT) and reading
(fetch, hash check, decoding) a 50 MiB value held the loop for some 250 ms more.
The serializer's own text is still made on the loop; a small value never leaves it.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from cairn import limits
from cairn.blobs import reference
from cairn.blobs.reference import (
    MARK,
    PREFIX,
    BlobError,
    BlobStoreUnavailable,
    BlobUnwritable,
    Reference,
)
from cairn.blobs.stores import BlobStore, BlobStoreRefused
from cairn.codecs import coded
from cairn.codecs.coded import Codec
from cairn.errors import SerializationError
from cairn.limits import size_words
from cairn.serialization import Serializer
from cairn.serialization.json_text import encode_json as json_dumps
from cairn.serialization.serializers import ENCRYPTED, JsonSerializer

PREVIEW = 1000  # characters of an offloaded value the CLI and dashboard show
WARNED_NAMES = 1000  # value names logged as offloaded, at most (then logged anew)


class Offloaded:
    """A serializer that keeps texts over `inline_limit` bytes in `blobs`.

    `blobs` None (PostgreSQL without `blobs=`): a text over the limit is refused with
    SerializationError saying how to name a store every worker shares. `warn_above`
    (warn_value_size, bytes; None: never): a text over it is logged (see above).
    """

    def __init__(
        self,
        inner: Serializer,
        blobs: BlobStore | None,
        inline_limit: int,
        *,
        media_type: str = "application/json",
        warn_above: int | None = None,
    ) -> None:
        self.inner = inner
        self._inner_dumps = inner.dumps  # bound once: the small-value path is two lines
        self._inner_loads = inner.loads
        self._unlimited = limits.unlimited(inner)
        # What a step's input is composed in (the layers below the codec, no size check)
        # and sealed with (core/step_input.py), found once rather than before every step.
        self.inputs: tuple[Serializer, Codec | None] = (
            limits.unlimited(coded.under_codec(inner)),
            coded.codec_of(inner),
        )
        self.blobs = blobs
        self.inline_limit = inline_limit
        self.warn_above = warn_above
        self._warned: set[str] = set()
        # A character is at most 4 UTF-8 bytes: a text this short is never over the limit
        # (nor over the warning size).
        quiet = inline_limit if warn_above is None else min(inline_limit, warn_above)
        self._checked: Any = None
        if isinstance(inner, limits.SizeLimited):
            # No codec between (the common case): the serializer is called here, and one
            # length check stands for the size check's and the offload's while it is short.
            self._inner_dumps = inner.inner.dumps
            self._inner_loads = inner.inner.loads  # SizeLimited.loads only passes it on
            self._checked = inner.checked
            quiet = min(quiet, inner.limits.max_value_bytes)
        self._surely_inline = quiet // 4
        self.media_type = media_type
        # The text is cairn's JSON serializer's own (no codec, no user serializer): made
        # twice, it is the same text, and nothing else happened (core/common_steps.py).
        self.plain_json = getattr(self._inner_dumps, "__func__", None) is JsonSerializer.dumps
        self.inner_dumps = self._inner_dumps
        self.surely_inline = self._surely_inline

    def dumps(self, value: Any, *, what: str) -> str:
        """The inner text, or the reference of the blob it was written to."""
        text = self._inner_dumps(value, what=what)
        if len(text) <= self._surely_inline:
            return text
        if self._checked is not None:
            text = self._checked(text, what, value)  # the size check the call skipped
        return self._offload(text, what)

    async def dumps_async(self, value: Any, *, what: str) -> str:
        """`dumps`, a text surely over the inline limit offloaded in a thread."""
        text = self._inner_dumps(value, what=what)
        if len(text) <= self._surely_inline:
            return text
        return await self.finish_async(text, value, what=what)

    async def finish_async(self, text: str, value: Any, *, what: str) -> str:
        """`dumps_async(value)`, whose inner text (`inner_dumps`) is `text`, made already."""
        if len(text) <= self._surely_inline:
            return text
        if self._checked is not None:
            text = self._checked(text, what, value)  # the size check the call skipped
        if len(text) <= self.inline_limit or self.blobs is None:
            return self._offload(text, what)  # at most inline_limit characters: here
        return await asyncio.to_thread(self._offload, text, what)

    async def loads_async(self, text: str) -> Any:
        """`loads`, blobs it references fetched, checked and decoded in a thread."""
        if MARK in text:
            return await asyncio.to_thread(self.loads, text)
        return self._inner_loads(text)

    def _offload(self, text: str, what: str) -> str:
        data = text.encode("utf-8", "surrogatepass")
        warn = self.warn_above is not None and len(data) > self.warn_above
        if len(data) <= self.inline_limit:
            if warn:
                limits.warn_inline(what, len(data), self.warn_above or 0, self.inline_limit)
            return text
        if self.blobs is None:
            raise SerializationError(
                f"cannot store {what}: it is {size_words(len(data))}, over inline_limit "
                f"({size_words(self.inline_limit)}), and this engine has no blob store; a "
                "PostgreSQL engine needs one every worker shares: "
                "Engine(blobs='file:///shared/dir') or CAIRN_BLOBS",
                what=what,
                type_name="blob",
            )
        ref = reference.of(data, self.media_type)
        try:
            self.blobs.put(ref.sha256, data)
        except BlobStoreRefused as exc:  # waiting would not help: refused for good
            raise SerializationError(
                f"cannot store {what} in {self.blobs.where}: {exc}",
                what=what,
                type_name="blob",
            ) from exc
        except OSError as exc:
            raise BlobUnwritable(
                f"cannot store {what}: writing blob {ref.sha256} to {self.blobs.where} "
                f"failed: {exc}",
                what=what,
                type_name="blob",
                where=self.blobs.where,
                reason=reason_of(exc),
            ) from exc
        if warn and what not in self._warned:
            if len(self._warned) >= WARNED_NAMES:
                self._warned.clear()
            self._warned.add(what)
            limits.warn_offloaded(what, len(data), self.warn_above or 0, self.blobs.where)
        return ref.text()

    def unlimited(self) -> Serializer:
        """The inner layers without size checks (for step inputs, cut short and shown only)."""
        return self._unlimited

    def loads(self, text: str) -> Any:
        """The value of a stored text, its blob fetched and checked if it is a reference."""
        if MARK not in text:  # no reference anywhere: one substring search, in C
            return self._inner_loads(text)
        if text.startswith(PREFIX):
            return self._inner_loads(self.fetch(reference.parse(text)))
        if text.startswith("["):
            return self._loads_list(text)
        return self._inner_loads(text)

    def fetch(self, ref: Reference) -> str:
        """The stored text of `ref`, its hash checked; BlobError if missing or corrupt."""
        where = "no blob store" if self.blobs is None else self.blobs.where
        data = None if self.blobs is None else self._get(self.blobs, ref)
        if data is None:
            raise BlobError(
                f"blob {ref.sha256} ({size_words(ref.size)}) is missing from {where}",
                blob=ref.sha256,
                fix=reference.RESTORE,
            )
        if reference.of(data, ref.media_type) != ref:
            raise BlobError(
                f"blob {ref.sha256} in {where} is corrupt: its bytes do not match its "
                f"sha256 and size ({size_words(ref.size)} expected, {len(data)} bytes read)",
                blob=ref.sha256,
                fix=reference.RESTORE,
            )
        return data.decode("utf-8", "surrogatepass")

    def _get(self, blobs: BlobStore, ref: Reference) -> bytes | None:
        """The blob's bytes, or None; what the store's failure means if it fails."""
        try:
            return blobs.get(ref.sha256)
        except (BlobStoreRefused, PermissionError) as exc:  # until someone fixes the store
            damaged = isinstance(exc.__cause__, IsADirectoryError | NotADirectoryError)
            raise BlobError(
                f"blob {ref.sha256} ({size_words(ref.size)}) cannot be read from "
                f"{blobs.where}: {first_line(exc)}",
                blob=ref.sha256,
                fix=reference.RESTORE if damaged else reference.SET_UP,
            ) from exc
        except OSError as exc:  # away for now: no connection, a 5xx, throttled
            raise BlobStoreUnavailable(
                first_line(exc), where=blobs.where, blob=ref.sha256, reason=reason_of(exc)
            ) from exc

    def whole(self, text: str) -> str:
        """A stored text in full: a reference's blob fetched and checked, else `text`."""
        return self.fetch(reference.parse(text)) if text.startswith(PREFIX) else text

    def _loads_list(self, text: str) -> Any:
        """A list of stored texts (encoded_list), some of them references."""
        try:
            items = json.loads(text)
        except ValueError:
            return self.inner.loads(text)
        if not isinstance(items, list):
            return self.inner.loads(text)
        parts = []
        for item in items:
            if isinstance(item, dict) and item.get("__cairn__") == "blob":
                parts.append(self.fetch(reference.parse(json_dumps(item))))
            else:
                parts.append(json_dumps(item))
        return self.inner.loads("[" + ",".join(parts) + "]")

    def shown(self, text: str) -> dict[str, Any] | None:
        """What people are shown of an offloaded value (size, hash, preview), or None.

        None when `text` is not a reference. The preview is the first characters of the
        stored text, read without fetching the whole blob (and so not hash-checked).
        """
        if not text.startswith(PREFIX):
            return None
        ref = reference.parse(text)
        try:
            head = None if self.blobs is None else self.blobs.head(ref.sha256, PREVIEW * 4)
        except OSError as exc:  # refused, or away for now: said in one line, not raised
            return {
                "offloaded": {
                    **ref.as_dict(),
                    "preview": None,
                    "missing": False,
                    "unreadable": self._unreadable(exc),
                }
            }
        preview = None if head is None else head.decode("utf-8", "replace")[:PREVIEW]
        if preview is not None and preview.startswith(ENCRYPTED):
            # Ciphertext's first characters say nothing: name its key, as inline values do.
            preview = f"encrypted ({preview[len(ENCRYPTED) :].partition(':')[0]})"
        return {"offloaded": {**ref.as_dict(), "preview": preview, "missing": head is None}}

    def _unreadable(self, exc: OSError) -> str:
        """Why a preview could not be read, in one line naming the store (and no host)."""
        where = "the blob store" if self.blobs is None else self.blobs.where
        if isinstance(exc, BlobStoreRefused | PermissionError):
            return f"{where} refused to read it: {first_line(exc)}"
        return f"{where} did not answer ({reason_of(exc)})"


def first_line(exc: BaseException) -> str:
    """The first line of `exc` (botocore's may run on), at most 300 characters."""
    lines = str(exc).strip().splitlines()
    return (lines[0] if lines else type(exc).__name__)[:300]


def reason_of(exc: OSError) -> str:
    """What failed, in a word and without a host: an S3 error code, the error's class."""
    cause = exc.__cause__ or exc
    response = getattr(cause, "response", None)
    if isinstance(response, dict):
        code = response.get("Error", {}).get("Code")
        if code:
            return str(code)
    if cause is exc and exc.strerror:
        return exc.strerror
    return type(cause).__name__
