"""`cairn db rekey`: every value encrypted under an old key rewritten under the current one.

Table by table and column by column, in batches of one transaction each (see
store/programs/rekey.py): safe to stop at any point and run again. A value whose key the
codec does not have stops it with that key's id named; keys may be dropped from
CAIRN_KEYS once a rekey has finished and no unfinished run was started before it (see
docs/howto/encryption.md for what a rekey leaves as it is).
"""

from __future__ import annotations

from cairn.codecs import sealed
from cairn.codecs.encrypted import Encrypted
from cairn.store.programs import rekey as rekey_ops
from cairn.store.protocol import Store

BATCH = 500


async def rekey(store: Store, codec: Encrypted, *, batch: int = BATCH) -> dict[str, int]:
    """Rewrite every stored value not under `codec.current`; how many per `table.column`."""
    head = f"{sealed.PREFIX}{codec.current}:"

    def recode(text: str) -> str:
        return codec.encode(codec.decode(text))

    done: dict[str, int] = {}
    for table, _, columns in rekey_ops.SEALED_COLUMNS:
        for column in columns:
            count = 0
            while True:
                op = rekey_ops.rekey_batch(
                    table, column, prefix=sealed.PREFIX, head=head, recode=recode, limit=batch
                )
                found = await store.write(op)
                count += found
                if found < batch:
                    break
            if count:
                done[f"{table}.{column}"] = count
    return done
