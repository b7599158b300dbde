"""Hook tokens: random, handed to outsiders, and stored only as a digest.

The hooks table and the message channel hold `digest(token)`, so reading the database's
hook rows or a run's history does not give anyone a token that resumes the run. The
run's journal keeps the token itself (a replay must hand the workflow the same token,
for instance to a step that has not sent it yet); history and `--json` leave it out, of
hook entries, and a step's stored input never holds a token of its run (see `hide`).
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Collection
from typing import Any

HIDDEN = "[hook token]"  # stored in a step's input where the token was


def new_token() -> str:
    """A new token: 192 random bits, URL-safe, never starting with "-".

    One in 64 would start with "-", which a command line reads as an option
    (`cairn hooks resume -Kx...` was "unrecognized arguments"); such a draw is redrawn.
    """
    while True:
        token = secrets.token_urlsafe(24)
        if not token.startswith("-"):
            return token


def digest(token: str) -> str:
    """What the database stores and looks up for `token` (SHA-256, hex)."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def may_be_stored_as_is(token: str) -> bool:
    """Whether `token` may be one of a hook created before tokens were stored as digests.

    Those were always 32 URL-safe characters and stay stored as is. A digest (64 hex
    characters) read from the database never qualifies, so it cannot resume a hook.
    """
    return len(token) == 32


def redact(facts: Any) -> Any:
    """A hook's journal facts without its token or channel, for history and output."""
    if not isinstance(facts, dict) or "token" not in facts:
        return facts
    return {k: v for k, v in facts.items() if k not in ("token", "channel")}


def hide(text: str, tokens: Collection[str]) -> str:
    """`text` (a step's serialized input) with each of `tokens` replaced by HIDDEN.

    Done before the input is stored, since once the hook is called its token is nowhere
    else to look for. Tokens are URL-safe characters, which JSON never escapes: a token
    passed to a step (alone or inside a URL) appears in the text as is, and the text
    stays valid JSON after the replacement.
    """
    for token in tokens:
        if token in text:
            text = text.replace(token, HIDDEN)
    return text
