"""`cairn db rekey` for offloaded values: a blob under an old key becomes a new blob.

A value over `inline_limit` is encrypted, then offloaded (docs/howto/large-values.md): the
column holds a reference and the ciphertext, naming its key, is in the blob. So the
column's text says nothing of the key; the blob's first bytes do. Each reference is
looked at (its blob's head read), and one under an old key is decrypted, encrypted under
the current key and written as a new blob before the column is changed to name it, so a
reference never names a blob that is not there. The old blob is left for the prune's
sweep, which deletes blobs nothing names. A list of offloaded messages (a `receive`)
and a JSON object holding references (a child's result in its parent's history) are
rewritten item by item. A missing or corrupt blob is left as it is (reading it fails
as before); one under a key the codec lacks stops rekey, naming the key.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from cairn.blobs import reference
from cairn.blobs.reference import MARK, PREFIX
from cairn.blobs.stores import BlobStore
from cairn.codecs import sealed
from cairn.codecs.encrypted import Encrypted
from cairn.serialization.json_text import encode_json
from cairn.store.programs import rekey as rekey_ops
from cairn.store.protocol import Store

_HEAD = 80  # bytes: `aesgcm:` and a key id of at most 64 characters


async def rekey_blobs(
    store: Store, codec: Encrypted, blobs: BlobStore, *, batch: int
) -> dict[str, int]:
    """Rewrite every offloaded value not under `codec.current`; how many per column."""
    done: dict[str, int] = {}
    for table, _, columns in rekey_ops.SEALED_COLUMNS:
        for column in columns:
            count, after = 0, None
            while True:
                op = rekey_ops.referencing(table, column, mark=MARK, after=after, limit=batch)
                rows = await store.write(op)
                changes = []
                for row in rows:
                    old = str(row[-1])
                    new = await asyncio.to_thread(_recode, codec, blobs, old)
                    if new != old:
                        changes.append((tuple(row[:-1]), old, new))
                if changes:
                    count += await store.write(rekey_ops.rewrite(table, column, changes))
                if len(rows) < batch:
                    break
                after = tuple(rows[-1][:-1])
            if count:
                done[f"{table}.{column} (offloaded)"] = count
    return done


def _recode(codec: Encrypted, blobs: BlobStore, text: str) -> str:
    """`text` with each reference to a blob under an old key replaced by a new blob's."""
    if text.startswith(PREFIX):
        return _recode_blob(codec, blobs, text)
    try:
        found = json.loads(text)
    except ValueError:
        return text
    if isinstance(found, list):
        items = [_recode_item(codec, blobs, item) for item in found]
        return text if items == found else encode_json(items)
    if isinstance(found, dict):
        inner = {k: _recode(codec, blobs, v) if isinstance(v, str) else v for k, v in found.items()}
        return text if inner == found else json.dumps(inner)
    return text


def _recode_item(codec: Encrypted, blobs: BlobStore, item: Any) -> Any:
    if isinstance(item, dict) and item.get("__cairn__") == "blob":
        return json.loads(_recode_blob(codec, blobs, encode_json(item)))
    return item


def _recode_blob(codec: Encrypted, blobs: BlobStore, text: str) -> str:
    ref = reference.parse(text)
    head = blobs.head(ref.sha256, _HEAD)
    key_id = None if head is None else sealed.key_of(head.decode("ascii", "replace"))
    if key_id is None or key_id == codec.current:
        return text  # missing, not encrypted, or already under the current key
    data = blobs.get(ref.sha256)
    if data is None or reference.of(data, ref.media_type) != ref:
        return text  # gone or corrupt meanwhile: reading it fails as before
    fresh = codec.encode(codec.decode(data.decode("utf-8", "surrogatepass")))
    written = fresh.encode("utf-8", "surrogatepass")
    new = reference.of(written, ref.media_type)
    blobs.put(new.sha256, written)  # before the reference that names it
    return new.text()
