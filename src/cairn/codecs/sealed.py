"""The stored form of an encrypted text: `aesgcm:<key id>:<base64 of nonce + ciphertext>`.

No text a serializer writes starts so (JSON starts with `{ [ " - t f n` or a digit), so a
stored text is recognised as encrypted by its prefix alone, and the key id it names is read
without any key: an operator without keys sees "encrypted (k1)", never a traceback.
"""

from __future__ import annotations

import re

from cairn.serialization.serializers import ENCRYPTED

PREFIX = ENCRYPTED
"""What every encrypted stored text starts with (`aesgcm:`)."""

KEY_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}")
"""What a key id may be: it travels in the clear before the ciphertext, so no `:`."""


def key_of(text: str | None) -> str | None:
    """The id of the key `text` was encrypted with; None if `text` is not encrypted."""
    if text is None or not text.startswith(PREFIX):
        return None
    return text[len(PREFIX) :].partition(":")[0]


def placeholder(key_id: str) -> str:
    """What people are shown instead of a value they have no key for."""
    return f"encrypted ({key_id})"


def shown(text: str | None) -> str | None:
    """`placeholder` of an encrypted `text`; None if `text` is not encrypted."""
    key_id = key_of(text)
    return None if key_id is None else placeholder(key_id)
