"""Hook tokens: random, handed to outsiders, and stored only as a digest.

The hooks table and the message channel hold `digest(token)`, so reading the database's
hook rows or a run's history does not give anyone a token that resumes the run. The
run's journal keeps the token itself (a replay must hand the workflow the same token,
for instance to a step that has not sent it yet); history and `--json` leave it out, of
hook entries and of the inputs of the steps it was passed to.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Collection
from typing import Any

HIDDEN = "[hook token]"  # what history shows where a step's input held a token


def new_token() -> str:
    """A new token: 192 random bits, URL-safe."""
    return secrets.token_urlsafe(24)


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


def token_of(facts: Any) -> str | None:
    """The token in a hook's journal facts, if they hold one."""
    token = facts.get("token") if isinstance(facts, dict) else None
    return token if isinstance(token, str) and token else None


def hide(text: str | None, tokens: Collection[str]) -> str | None:
    """`text` (a stored input) with each of `tokens` replaced by HIDDEN.

    Tokens are URL-safe characters, which JSON never escapes: a token passed to a step
    appears in its stored input as is, and JSON text stays valid after the replacement.
    """
    if text is None:
        return None
    for token in tokens:
        text = text.replace(token, HIDDEN)
    return text
