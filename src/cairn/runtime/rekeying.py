"""`cairn db rekey`: every value encrypted under an old key rewritten under the current one.

Table by table and column by column, each walked once in key order, in batches of one
transaction each (see store/programs/rekey.py): safe to stop at any point and run again.
A value is encrypted whole (most), or a JSON object holds encrypted texts among its
values (a finished child's result and error, as its parent's history keeps them): both
are rewritten. A value whose key the codec does not have stops it with that key's id
named. See docs/howto/encryption.md.
"""

from __future__ import annotations

import json

from cairn.blobs.stores import BlobStore
from cairn.codecs import sealed
from cairn.codecs.encrypted import Encrypted
from cairn.runtime.rekey_blobs import rekey_blobs
from cairn.store.programs import rekey as rekey_ops
from cairn.store.protocol import Store

BATCH = 500


async def rekey(
    store: Store, codec: Encrypted, *, batch: int = BATCH, blobs: BlobStore | None = None
) -> dict[str, int]:
    """Rewrite every stored value not under `codec.current`; how many per `table.column`.

    With `blobs` (the database's blob store), offloaded values too: their counts are
    under `table.column (offloaded)` (see runtime/rekey_blobs.py).
    """
    head = f"{sealed.PREFIX}{codec.current}:"
    done: dict[str, int] = {}

    def recode(text: str) -> str:
        if text.startswith(sealed.PREFIX):
            return text if codec.is_current(text) else codec.encode(codec.decode(text))
        try:
            found = json.loads(text)
        except ValueError:
            return text
        if not isinstance(found, dict):
            return text
        inner = {k: recode(v) if isinstance(v, str) else v for k, v in found.items()}
        return text if inner == found else json.dumps(inner)

    for table, _, columns in rekey_ops.SEALED_COLUMNS:
        for column in columns:
            count, after = 0, None
            while True:
                op = rekey_ops.rekey_batch(
                    table,
                    column,
                    prefix=sealed.PREFIX,
                    head=head,
                    recode=recode,
                    after=after,
                    limit=batch,
                )
                found, after = await store.write(op)
                count += found
                if found < batch or after is None:
                    break
            if count:
                done[f"{table}.{column}"] = count
    if blobs is not None:
        done.update(await rekey_blobs(store, codec, blobs, batch=batch))
    return done
