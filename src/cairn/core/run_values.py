"""RunValues: the stored values an attempt reads, and the one place a missing key is met.

A value encrypted under a key this worker does not have (`KeyUnavailable`) is no fault of
the run: the attempt leaves with `KeyMissing`, a HandBack that workflow code cannot catch
as an Exception, and its worker hands the run back for one that has the key
(runtime/executing.py). So every stored value an attempt reads (its arguments, replayed
results and errors, payloads, children's outcomes, mailbox messages) is read here. An
offloaded one the blob store does not give back for now is waited out (`wait_out`).

A receive's messages are put together inside the write that takes them (`stored_list`);
with a codec, their blobs are read for that. Never inside the write (a GET would hold the
database's write lock, and an outage there would be waited out as the database's): the
write raises BlobsNeeded, is rolled back, and the blobs are read first (`read_ahead`).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Sequence
from types import TracebackType
from typing import Any

from cairn import blobs
from cairn.blobs import BlobStoreUnavailable, reference
from cairn.codecs import coded
from cairn.core.signals import KeyMissing
from cairn.errors import KeyUnavailable
from cairn.serialization import Serializer

WaitOut = Callable[[Callable[[], Awaitable[Any]], BlobStoreUnavailable, str | None], Awaitable[Any]]
"""What waits out a blob store that does not answer a read (core/blob_reads.py `fetched`).

Its third argument: the durable point whose value is read, where a cancel asked
meanwhile may be delivered (None: nowhere).
"""


class BlobsNeeded(Exception):
    """Raised inside a write by `stored_list`: read the blobs of `texts` first, outside it."""

    def __init__(self, texts: list[str]) -> None:
        super().__init__(f"{len(texts)} blobs to read before the write")
        self.texts = texts


class RunValues:
    """The run's stored values through `serializer`; a missing key leaves by `leave`."""

    def __init__(
        self,
        serializer: Serializer,
        leave: Callable[[BaseException], BaseException],
        wait_out: WaitOut | None = None,
    ) -> None:
        self.serializer = serializer
        self._reading = _Reading(leave)
        self._wait_out = wait_out
        # Reference text -> its blob's stored text, read ahead of a receive's write.
        self._ahead: dict[str, str] = {}

    def reading(self) -> _Reading:
        """Around a read of stored values: KeyUnavailable becomes the attempt's KeyMissing."""
        return self._reading

    def loads(self, text: str) -> Any:
        """The value stored as `text`."""
        with self.reading():
            return self.serializer.loads(text)

    async def loads_async(self, text: str, at: str | None = None) -> Any:
        """`loads` on the event loop: an offloaded value's blob read in a thread.

        `at`: the durable point whose value it is (see WaitOut).
        """
        with self.reading():
            try:
                return await blobs.loads_async(self.serializer, text)
            except BlobStoreUnavailable as exc:
                if self._wait_out is None:
                    raise
                again = functools.partial(blobs.loads_async, self.serializer, text)
                return await self._wait_out(again, exc, at)

    def unseal_json(self, text: str | None) -> Any:
        """The JSON value of a sealed text (an error); None for None."""
        with self.reading():
            return coded.unseal_json(self.serializer, text)

    def stored_list(self, texts: Sequence[str]) -> str:
        """What the serializer stores for the list of the values stored as `texts`.

        Called inside a write (on the store's thread): it reads no blob, BlobsNeeded naming
        those not read ahead, and a KeyUnavailable is the caller's to meet (`reading()`
        around the write: the attempt leaves on the loop, not in the transaction).
        """
        if coded.codec_of(self.serializer) is None:  # references kept as list items
            return coded.stored_list(self.serializer, texts)
        needed = [t for t in texts if reference.offloaded(t) and t not in self._ahead]
        if needed:
            raise BlobsNeeded(needed)
        ahead = self._ahead
        return coded.stored_list(self.serializer, texts, lambda t: ahead.get(t, t))

    async def read_ahead(self, texts: Sequence[str], at: str | None = None) -> None:
        """Read the blobs of the references `texts` for `stored_list` (waited out)."""
        for text in texts:
            self._ahead[text] = await self._whole(text, at)

    def forget_ahead(self) -> None:
        """Drop the blobs read ahead (once the write that needed them is made)."""
        self._ahead.clear()

    async def _whole(self, text: str, at: str | None) -> str:
        whole = functools.partial(asyncio.to_thread, blobs.whole, self.serializer, text)
        try:
            return await whole()
        except BlobStoreUnavailable as exc:
            if self._wait_out is None:
                raise
            found: str = await self._wait_out(whole, exc, at)
            return found


class _Reading:
    """`RunValues.reading()`: one per attempt, holding no state, so it nests.

    A class rather than a @contextmanager: every run reads its arguments through it, and
    a generator-based one costs a generator and three calls more each time.
    """

    __slots__ = ("_leave",)

    def __init__(self, leave: Callable[[BaseException], BaseException]) -> None:
        self._leave = leave

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if isinstance(exc, KeyUnavailable):
            raise self._leave(KeyMissing(exc.key_id, str(exc))) from None
