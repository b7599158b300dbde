"""A process without the keys must not store a run's inputs in the clear.

People are given a dashboard or the CLI without the keys (docs/howto/encryption.md): they
see statuses and names, not values. What such a process would send into a run whose
values are encrypted (an event, a hook's payload, a human task's answer) would be stored
as plain text beside the run's ciphertext, so it is refused, naming the key, before
anything is written. A process with a codec pays nothing for this; one without it reads
the run's arguments once per such send (an event's check is made in the send's own
transaction: `waits.send_message(unless_sealed=...)`, no read more).
"""

from __future__ import annotations

from typing import Protocol

from cairn.codecs import coded, sealed
from cairn.errors import KeyUnavailable
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
    refuse_sealed(None if run is None else run.args, run_id, what=what)


def unless_sealed(serializer: Serializer) -> str | None:
    """What `waits.send_message` refuses for a sender with `serializer`: None if it encrypts."""
    return None if coded.codec_of(serializer) is not None else sealed.PREFIX


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
