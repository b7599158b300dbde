"""A process without the keys must not store a run's inputs in the clear.

People are given a dashboard or the CLI without the keys (docs/howto/encryption.md): they
see statuses and names, not values. What such a process would send into a run whose
values are encrypted (an event, a hook's payload, a human task's answer) would be stored
as plain text beside the run's ciphertext, so it is refused, naming the key, before
anything is written. A process with a codec pays nothing for this; one without it reads
the run's arguments once per such send (an event's check is made in the send's own
transaction: `waits.send_message(unless_sealed=...)`, no read more). A run whose
arguments are offloaded is told by its blob's first bytes (`refuse_stored`).
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from cairn import blobs
from cairn.blobs import BlobStoreRefused, BlobStoreUnavailable, reference
from cairn.blobs.offloaded import first_line, reason_of
from cairn.blobs.stores import BlobStoreGone
from cairn.codecs import coded, sealed
from cairn.errors import KeyUnavailable, SerializationError
from cairn.serialization import Serializer
from cairn.store.programs import runs as run_ops
from cairn.store.protocol import Store


class Sender(Protocol):
    """What the check needs of a RunControl: its store and serializer."""

    store: Store
    serializer: Serializer


async def refuse_plain(control: Sender, run_id: str, *, what: str) -> None:
    """KeyUnavailable if this process has no codec and run `run_id` keeps its values encrypted.

    An unknown run passes: the caller reports it as it always has.
    """
    if coded.codec_of(control.serializer) is not None:
        return
    run = await control.store.read(run_ops.get_run(run_id))
    await refuse_stored(control, None if run is None else run.args, run_id, what=what)


def unless_sealed(serializer: Serializer) -> tuple[str, ...] | None:
    """What `waits.send_message` refuses for a sender with `serializer`: None if it encrypts.

    Arguments encrypted, or offloaded (their blob says: `refuse_stored` reads it).
    """
    return None if coded.codec_of(serializer) is not None else _UNLESS


_UNLESS = (sealed.PREFIX, reference.PREFIX)


async def refuse_stored(control: Sender, args: str | None, run_id: str, *, what: str) -> None:
    """`refuse_sealed` for the run's stored `args`, an offloaded one read from its blob.

    Offloaded arguments are encrypted before they are offloaded, so the reference says
    nothing: the blob's first bytes name the key (read in a thread). A blob this process
    cannot read (no blob store, or missing) leaves it unknown: refused too, in one line
    saying so, as storing a value in the clear beside ciphertext cannot be undone. A blob
    store away for now (no connection, a 5xx, throttled) is StoreUnavailable
    (BlobStoreUnavailable), in one line naming the run, the blob and the store: the same
    send may succeed later, and the API's 503 names the blob store, not the database.
    """
    if reference.offloaded(args):
        args = await asyncio.to_thread(_head, control.serializer, str(args), run_id, what)
    refuse_sealed(args, run_id, what=what)


def _head(serializer: Serializer, text: str, run_id: str, what: str) -> str:
    """The first characters of the offloaded stored text `text` (enough for its key id)."""
    ref = reference.parse(text)
    store = blobs.store_of(serializer)
    where = "this process has no blob store" if store is None else f"not in {store.where}"
    head = None
    if store is not None:
        try:
            head = store.head(ref.sha256, _HEAD)
        except (BlobStoreRefused, PermissionError) as exc:  # until someone fixes it
            where = f"unreadable in {store.where}: {exc}"
        except BlobStoreGone:  # no such directory (here): most likely not this process's store
            pass
        except OSError as exc:  # away for now (no connection, a 5xx, throttled)
            raise BlobStoreUnavailable(
                first_line(exc),
                where=store.where,
                blob=ref.sha256,
                reason=reason_of(exc),
                message=f"cannot store {what} for now: run {run_id!r} keeps its arguments in "
                f"blob {ref.sha256}, and reading it from {store.where} failed: "
                f"{first_line(exc)}; try again once the blob store answers",
            ) from exc
    if head is None:
        raise SerializationError(
            f"cannot store {what}: run {run_id!r} keeps its arguments in blob {ref.sha256} "
            f"({where}), so this process, which has no keys, cannot tell whether the run's "
            "values are encrypted; give it the blob store (CAIRN_BLOBS) or the keys "
            "(CAIRN_KEYS or CAIRN_KEYS_FILE)",
            what=what,
            type_name="blob",
        )
    return head.decode("utf-8", "replace")


_HEAD = len(sealed.PREFIX) + 65  # the prefix, the longest key id and its colon


def refuse_sealed(args: str | None, run_id: str, *, what: str) -> None:
    """KeyUnavailable naming the key if the run's stored `args` are encrypted."""
    key_id = sealed.key_of(args)
    if key_id is None:
        return
    raise KeyUnavailable(
        f"cannot store {what}: run {run_id!r} keeps its values encrypted (key {key_id!r}) "
        "and this process has no keys, so it would be stored in the clear; give this "
        "process the keys (CAIRN_KEYS or CAIRN_KEYS_FILE)",
        key_id=key_id,
    )
