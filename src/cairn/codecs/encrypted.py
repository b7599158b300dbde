"""Encrypted: AES-GCM (from `cryptography`) over stored texts, under named, rotating keys.

Each value is encrypted under the current key with a fresh 96-bit random nonce; the key's
id travels with it (`sealed.py`) and is bound to the ciphertext as associated data, so a
value names the key that opens it and keys rotate without rewriting history: old values
are read with the old key for as long as it is kept, and `cairn db rekey` rewrites them
under the current one when asked.
"""

from __future__ import annotations

import binascii
import os
from collections.abc import Mapping
from typing import Any

from cairn.codecs.sealed import KEY_ID, PREFIX, key_of
from cairn.errors import ConfigError, SerializationError
from cairn.errors import KeyUnavailable as KeyUnavailable  # declared with every error

__all__ = ["Encrypted", "KeyUnavailable"]

KEY_BYTES = 32
NONCE_BYTES = 12


class Encrypted:
    """A codec that encrypts every stored text with AES-256-GCM.

    Args:
        keys: Key id -> 32-byte key. Ids are 1-64 of `A-Z a-z 0-9 _ . -`; they are
            stored in the clear with each value.
        current: The id of the key new values are encrypted with.

    Raises:
        ConfigError: A key of the wrong length or type, a bad id, an unknown `current`,
            or `cryptography` not installed (`pip install 'cairn[crypto]'`); the message
            names the key at fault.
    """

    def __init__(self, keys: Mapping[str, bytes], current: str) -> None:
        if not isinstance(keys, Mapping) or not keys:
            raise ConfigError("Encrypted needs keys: a dict of key id -> 32-byte key")
        try:
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        except ImportError:  # pragma: no cover - the extra is in the dev install
            raise ConfigError(
                "encryption at rest needs the cryptography package: pip install 'cairn[crypto]'"
            ) from None
        from cryptography.exceptions import InvalidTag

        self._invalid: type[Exception] = InvalidTag
        self._ciphers: dict[str, Any] = {}
        for key_id, key in keys.items():
            if not isinstance(key_id, str) or not KEY_ID.fullmatch(key_id):
                raise ConfigError(
                    f"key id {key_id!r} is not 1-64 of letters, digits, '_', '.' or '-'"
                )
            if not isinstance(key, bytes | bytearray):
                raise ConfigError(
                    f"key {key_id!r} must be {KEY_BYTES} bytes, got {type(key).__name__}"
                )
            if len(key) != KEY_BYTES:
                raise ConfigError(f"key {key_id!r} must be {KEY_BYTES} bytes, got {len(key)}")
            self._ciphers[key_id] = AESGCM(bytes(key))
        if current not in self._ciphers:
            raise ConfigError(
                f"current key {current!r} is not among the keys ({', '.join(self._ciphers)})"
            )
        self.current = current
        self._cipher = self._ciphers[current]
        self._head = f"{PREFIX}{current}:"
        self._aad = current.encode("ascii")

    @property
    def key_ids(self) -> tuple[str, ...]:
        """The ids of the keys this codec can decrypt with."""
        return tuple(self._ciphers)

    def __repr__(self) -> str:  # never the keys themselves
        return f"Encrypted(keys={list(self._ciphers)!r}, current={self.current!r})"

    def encode(self, text: str) -> str:
        """`text` encrypted under the current key, as stored text."""
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._cipher.encrypt(nonce, _utf8(text), self._aad)
        return self._head + binascii.b2a_base64(nonce + sealed, newline=False).decode("ascii")

    def decode(self, text: str) -> str:
        """The text `encode` encrypted; a text not encrypted (written before) as it is.

        Raises:
            KeyUnavailable: encrypted under a key id this codec does not have.
            SerializationError: the key does not open it (wrong key, altered value) or
                it is not valid base64; the message names the key id.
        """
        key_id = key_of(text)
        if key_id is None:
            return text
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            raise KeyUnavailable(
                f"cannot decrypt a stored value: it was encrypted with key {key_id!r}, which "
                f"is not among this process's keys ({', '.join(self._ciphers)}); "
                "add it to CAIRN_KEYS",
                key_id=key_id,
            )
        body = text[len(PREFIX) + len(key_id) + 1 :]
        try:
            data = binascii.a2b_base64(body, strict_mode=True)
        except (binascii.Error, ValueError):
            raise SerializationError(
                f"cannot decrypt a stored value encrypted with key {key_id!r}: not valid base64"
            ) from None
        try:
            plain = cipher.decrypt(data[:NONCE_BYTES], data[NONCE_BYTES:], key_id.encode("ascii"))
        except (self._invalid, ValueError):
            raise SerializationError(
                f"cannot decrypt a stored value with key {key_id!r}: the key is not the one "
                "it was encrypted with, or the value was altered"
            ) from None
        try:
            return str(plain.decode("utf-8"))
        except UnicodeDecodeError:  # a lone surrogate (an exception's text, say)
            return str(plain.decode("utf-8", "surrogatepass"))

    def is_current(self, text: str) -> bool:
        """Whether `text` is encrypted under the current key (rekey leaves it alone)."""
        return text.startswith(self._head)


def _utf8(text: str) -> bytes:
    """`text` as UTF-8; a lone surrogate (an exception's text, say) kept as it is."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")
