"""How large a stored value and how long a history may grow, checked before anything is written.

A value is measured as the text its serializer stores (UTF-8 bytes): workflow arguments,
a step's result, an event's or hook's payload, a workflow's result. Past the limit `dumps`
raises SerializationError naming the value and its size, so the caller writes nothing.
Past the warning size it is logged by the offload layer (blobs/offloaded.py), which knows
where it goes: each time if it stays inline, once per value name if it is offloaded.
A history is measured in entries: the journal logs when a run passes the warning length
and refuses the entry past the limit (see core/journal.py), which fails the run with
HistoryTooLong.

The limits themselves are read by `config.limits` (Engine arguments, CAIRN_*, [tool.cairn]).
"""

from __future__ import annotations

from typing import Any

from cairn.config import Limits
from cairn.errors import HistoryTooLong, SerializationError
from cairn.observability import logcontext
from cairn.serialization import Serializer

log = logcontext.logger("cairn.limits")


def size_words(size: int) -> str:
    """`size` bytes for people: "2.0 MiB", "300.0 KiB", "512 bytes"."""
    if size >= 1024 * 1024:
        return f"{size / (1024 * 1024):.1f} MiB"
    if size >= 1024:
        return f"{size / 1024:.1f} KiB"
    return f"{size} bytes"


class SizeLimited:
    """A serializer whose `dumps` refuses too large values (blobs.Offloaded warns)."""

    def __init__(self, inner: Serializer, limits: Limits) -> None:
        self.inner = inner
        self.limits = limits

    def dumps(self, value: Any, *, what: str) -> str:
        """The inner serializer's text; SerializationError (nothing stored) if too large."""
        text = self.inner.dumps(value, what=what)
        # A character is at most 4 UTF-8 bytes: most values are measured without encoding.
        if len(text) * 4 <= self.limits.max_value_bytes:
            return text
        return self.checked(text, what, value)

    def checked(self, text: str, what: str, value: Any) -> str:
        """`text` (the inner text of `value`) measured: refused if too large.

        An outer layer that calls the inner serializer itself (blobs.Offloaded) measures
        its texts here, so that a small value passes one length check, not two layers.
        """
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > self.limits.max_value_bytes:
            raise SerializationError(
                f"cannot store {what}: it is {size_words(size)} ({size} bytes), over the "
                f"limit of {size_words(self.limits.max_value_bytes)} (max_value_size); store "
                "large data elsewhere (a file, an object store) and pass a reference",
                what=what,
                type_name=type(value).__name__,
            )
        return text

    def loads(self, text: str) -> Any:
        """The inner serializer's value (what was stored was already checked)."""
        return self.inner.loads(text)


def sized(serializer: Serializer, limits: Limits) -> Serializer:
    """`serializer` with `limits`'s value sizes checked on every `dumps`."""
    return SizeLimited(serializer, limits)


def unlimited(serializer: Serializer) -> Serializer:
    """`serializer` without size checks, for text that is cut short on its own (step inputs).

    An outer layer that has an `unlimited()` method (blobs.Offloaded: a text cut short
    is never offloaded) is asked for its own unlimited form.
    """
    if isinstance(serializer, SizeLimited):
        return serializer.inner
    unwrap = getattr(serializer, "unlimited", None)
    return serializer if unwrap is None else unwrap()


def warn_inline(what: str, size: int, warn: int, inline_limit: int) -> None:
    """Log that `what`, `size` bytes, over `warn` (warn_value_size), stays in the history."""
    log.warning(
        "cairn: %s is %s, over %s (warn_value_size), kept inline in the history "
        "(inline_limit %s): every replay reads it; a lower inline_limit offloads such values",
        what,
        size_words(size),
        size_words(warn),
        size_words(inline_limit),
    )


def warn_offloaded(what: str, size: int, warn: int, where: str) -> None:
    """Log that `what`, `size` bytes, over `warn` (warn_value_size), went to `where`."""
    log.warning(
        "cairn: %s is %s, over %s (warn_value_size), offloaded to %s: every replay past "
        "it reads it back (logged once per value name)",
        what,
        size_words(size),
        size_words(warn),
        where,
    )


def history_too_long(run_id: str, workflow: str, limit: int) -> HistoryTooLong:
    """The error of a run whose history would pass `limit` entries."""
    return HistoryTooLong(
        f"run {run_id!r} of workflow {workflow!r} would record more than {limit:,} history "
        "entries (max_history): a run that goes on for ever should call "
        "cairn.continue_as_new(...) now and then, to go on as a fresh run with an empty history",
        limit=limit,
    )


def warn_history(run_id: str, workflow: str, entries: int) -> None:
    """Log once a run's history passes the warning length."""
    log.warning(
        "cairn: run %s of workflow %s has %d history entries (warn_history): every replay "
        "reads them all; consider cairn.continue_as_new(...) before it reaches max_history",
        run_id,
        workflow,
        entries,
    )
