"""RunValues: the stored values an attempt reads, and the one place a missing key is met.

A value encrypted under a key this worker does not have (`KeyUnavailable`) is no fault of
the run: the attempt leaves with `KeyMissing`, a HandBack that workflow code cannot catch
as an Exception, and its worker hands the run back for one that has the key
(runtime/executing.py). So every stored value an attempt reads (its arguments, replayed
results and errors, payloads, children's outcomes, mailbox messages) is read here. An
offloaded one the blob store does not give back for now is waited out (`wait_out`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from types import TracebackType
from typing import Any

from cairn import blobs
from cairn.blobs import BlobStoreUnavailable
from cairn.codecs import coded
from cairn.core.signals import KeyMissing
from cairn.errors import KeyUnavailable
from cairn.serialization import Serializer

WaitOut = Callable[[Callable[[], Awaitable[Any]], BlobStoreUnavailable], Awaitable[Any]]
"""What waits out a blob store that does not answer a read (core/durable.py `fetched`)."""


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

    def reading(self) -> _Reading:
        """Around a read of stored values: KeyUnavailable becomes the attempt's KeyMissing."""
        return self._reading

    def loads(self, text: str) -> Any:
        """The value stored as `text`."""
        with self.reading():
            return self.serializer.loads(text)

    async def loads_async(self, text: str) -> Any:
        """`loads` on the event loop: an offloaded value's blob read in a thread."""
        with self.reading():
            try:
                return await blobs.loads_async(self.serializer, text)
            except BlobStoreUnavailable as exc:
                if self._wait_out is None:
                    raise
                return await self._wait_out(lambda: blobs.loads_async(self.serializer, text), exc)

    def unseal_json(self, text: str | None) -> Any:
        """The JSON value of a sealed text (an error); None for None."""
        with self.reading():
            return coded.unseal_json(self.serializer, text)

    def stored_list(self, texts: Sequence[str]) -> str:
        """What the serializer stores for the list of the values stored as `texts`."""
        with self.reading():
            return coded.stored_list(self.serializer, texts)


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
