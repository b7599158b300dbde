"""The layers every stored value passes through, built one way for an Engine and a Client.

Inside out: the serializer's text (`cairn.serialization`), its size check
(`cairn.limits`), the codec (`cairn.codecs`, encryption at rest), and, outermost, the
offload of texts over `inline_limit` to a blob store (`cairn.blobs`). So a blob holds
what the codec wrote, `max_value_size` measures the plain text, and `warn_value_size`,
checked by the offload, the stored text (as `inline_limit` does).
"""

from __future__ import annotations

from typing import Any

from cairn import codecs, limits, serialization
from cairn.blobs import offloading
from cairn.config import Limits
from cairn.serialization import Serializer


def stack(
    serializer: str,
    sizes: Limits,
    codec: codecs.Codec | None,
    store: object,
    *,
    inline_limit: Any = None,
    blobs: Any = None,
) -> Serializer:
    """The serializer named `serializer` inside the size check, `codec` and the offload.

    `codec` None: the keys of CAIRN_KEYS / CAIRN_KEYS_FILE, if set. `inline_limit` and
    `blobs` unset: their settings, then the defaults (see `cairn.blobs.offloading`).
    """
    sized = limits.sized(serialization.get(serializer), sizes)
    coded = codecs.coding(sized, codec or codecs.from_env())
    return offloading(coded, store, inline=inline_limit, blobs=blobs, warn=sizes.warn_value_bytes)
