"""Codecs: what stored texts go through on their way to the database and back.

`Encrypted` encrypts every stored value at rest (AES-GCM, `pip install 'cairn[crypto]'`):

    engine = cairn.Engine(url, codec=cairn.codecs.Encrypted(keys={"k1": key1}, current="k1"))

The package, by concern: `sealed` (the stored form, readable without keys: "encrypted
(k1)"), `encrypted` (the AES-GCM codec and its keys), `keys` (keys given by operators in
CAIRN_KEYS or CAIRN_KEYS_FILE), `coded` (a serializer whose texts pass a codec; the texts
stored beside it: errors, answers), `rekey` (rewriting stored values under the current key).
See docs/howto/encryption.md.
"""

from __future__ import annotations

from cairn.codecs.coded import Codec, coding
from cairn.codecs.encrypted import Encrypted, KeyUnavailable
from cairn.codecs.keys import from_env, new_key, parse

__all__ = ["Codec", "Encrypted", "KeyUnavailable", "coding", "from_env", "new_key", "parse"]
