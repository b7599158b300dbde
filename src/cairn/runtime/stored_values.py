"""One stored value of a run read whole, for download: `cairn runs show --download`, the API.

Here, not in representation/ (which refuses nothing): a name the run has no value under
is refused, and so is a missing or corrupt blob.

The value is named `args`, `result`, or a history entry's key (`produce#1`: that step's
result). Its stored text is given as the serializer wrote it: an offloaded value's fetched
from its blob and checked against its hash (a missing or corrupt blob raises BlobError,
naming it), an encrypted one decrypted with this process's keys (without the key:
KeyUnavailable, naming it; never the ciphertext). The CLI and dashboard show only a
preview of an offloaded value; this is the rest.
"""

from __future__ import annotations

from cairn import blobs
from cairn.codecs import coded
from cairn.errors import InvalidValue
from cairn.runtime.control import RunControl
from cairn.store.programs import journal as journal_ops


async def stored_text(control: RunControl, run_id: str, name: str) -> str:
    """The whole stored text of value `name` of run `run_id` (InvalidValue if it has none)."""
    run = await control.record(run_id)
    if name in ("args", "result"):
        text = run.args if name == "args" else run.result
    else:
        records = await control.store.read(journal_ops.load_journal(run_id))
        found = [r for r in records if r.key == name]
        if not found:
            keys = ", ".join(r.key for r in records[:10])
            raise InvalidValue(
                f"run {run_id!r} has no history entry {name!r} "
                f"(use args, result, or an entry's key: {keys or 'none yet'})"
            )
        text = found[-1].result
    if text is None:
        raise InvalidValue(f"run {run_id!r} has no stored {name} yet")
    return coded.unseal(control.serializer, blobs.whole(control.serializer, text))
