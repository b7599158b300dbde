"""Keys given to processes by operators: CAIRN_KEYS, or a file named by CAIRN_KEYS_FILE.

The text holds `<key id>:<base64 of 32 bytes>` entries, separated by commas, spaces or
new lines (a file may carry `#` comments). New values are encrypted with CAIRN_CURRENT_KEY,
else the last key listed; every key listed decrypts. The environment itself is read by
`cairn.config` (`config.keys_setting`), like every other setting.
"""

from __future__ import annotations

import base64
import binascii
import re

from cairn import config
from cairn.codecs.encrypted import Encrypted
from cairn.errors import ConfigError


def parse(text: str, *, where: str, current: str | None = None) -> Encrypted:
    """The codec of the keys in `text`; ConfigError naming `where` and the key at fault."""
    lines = (line.partition("#")[0] for line in text.splitlines())
    entries = [entry for line in lines for entry in re.split(r"[,\s]+", line) if entry]
    if not entries:
        raise ConfigError(f"{where} holds no keys (expected KEY_ID:BASE64_KEY, ...)")
    keys: dict[str, bytes] = {}
    for entry in entries:
        key_id, colon, encoded = entry.partition(":")
        if not colon or not key_id:
            raise ConfigError(f"{where}: an entry is not KEY_ID:BASE64_KEY ({entry[:12]!r}...)")
        if key_id in keys:
            raise ConfigError(f"{where}: key {key_id!r} is listed twice")
        try:
            keys[key_id] = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raise ConfigError(f"{where}: key {key_id!r} is not valid base64") from None
    try:
        return Encrypted(keys, current or list(keys)[-1])
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def from_env() -> Encrypted | None:
    """The codec of CAIRN_KEYS (or CAIRN_KEYS_FILE) and CAIRN_CURRENT_KEY; None if unset."""
    found = config.keys_setting()
    if found is None:
        return None
    text, where, current = found
    return parse(text, where=where, current=current)


def new_key() -> str:
    """A fresh random key, base64 (what `cairn db keygen` prints)."""
    import os

    return base64.b64encode(os.urandom(32)).decode("ascii")
